// The worker under the faults the chaos campaign found (test/chaos): a stop or an attempt
// timeout in the middle of a model stream, and a heartbeat racing an acquisition.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import { createChat, loadHistory } from "../../src/chatd/transitions/index.ts";
import { until } from "../support/agent.ts";
import { settle, startChat, testWorker, useLoops } from "../support/chatd.ts";
import {
  describeDatabases,
  openTestDatabase,
  testDatabaseUrl,
  type TestDatabase,
} from "../support/db.ts";

const { env, cleanup } = useLoops();

/** A model step that streams 30 words, one every 100 ms. */
const SLOW = { text: Array.from({ length: 30 }, (_, i) => `w${i}`).join(" "), delayMs: 100 };
/** A model step that streams 5 words and then nothing until the client leaves: always mid-stream. */
const STALLED = { text: "w0 w1 w2 w3 w4 w5 w6 w7", delayMs: 20, hangAfterChunks: 5 };

describeDatabases("worker faults", (db) => {
  it("a model stream cut off by a graceful stop is not committed; the next owner answers in full", async () => {
    const buffer = new StreamBuffer();
    const { fake, setup, worker } = await env(db, { buffer });
    fake.script(STALLED, { text: "the whole answer" });
    const chatId = await startChat(db(), setup, "go");
    await until(() => buffer.parts(chatId).length >= 3, 10_000);
    await worker.stop();
    expect((await loadHistory(db(), chatId)).map((m) => m.role)).toEqual(["user"]);
    const next = testWorker(db());
    await next.start();
    cleanup.push(() => next.stop());
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => [m.role, m.content])).toEqual([
      ["user", [{ type: "text", text: "go" }]],
      ["assistant", [{ type: "text", text: "the whole answer" }]],
    ]);
  });

  it("a turn started with the worker's local claim runs on it, with no acquisition round", async () => {
    // No periodic round within the test, and a listener that kicks none: only the claim runs it.
    const { fake, setup, worker } = await env(db, { acquireIntervalMs: 60_000 });
    expect(testWorker(db()).localClaim()).toBeUndefined(); // not started: nothing to claim for
    fake.script({ text: "claimed here" });
    const claim = worker.localClaim()!;
    const chat = await db().transaction((tx) =>
      createChat(
        tx,
        {
          ownerId: setup.userId,
          workspaceId: setup.workspaceId,
          modelConfigId: setup.modelConfigId,
          message: "go",
        },
        claim,
      ),
    );
    expect(chat.workerId).toBe(worker.id);
    claim.committed();
    expect(worker.ownedChats).toEqual([chat.id]);
    const { chat: done, history } = await settle(db(), chat.id);
    expect(done.status).toBe("waiting");
    expect(history.at(-1)!.content).toEqual([{ type: "text", text: "claimed here" }]);
    await worker.stop();
    expect(worker.localClaim()).toBeUndefined();
  });

  it("a task attempt that runs out of time mid-stream is retried, not taken for a model error", async () => {
    const { fake, setup } = await env(db, { attemptTimeoutMs: 500 });
    fake.script(STALLED, { text: "the whole answer" });
    const chatId = await startChat(db(), setup, "go");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.lastError).toBeNull();
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(history[1]!.content).toEqual([{ type: "text", text: "the whole answer" }]);
    expect(fake.requests).toHaveLength(2);
  });
});

// A heartbeat waiting on a row lock while the worker acquires: a second connection, so Postgres.
describe.skipIf(!testDatabaseUrl())("worker faults on Postgres", () => {
  let t: TestDatabase | undefined;
  beforeEach(async () => {
    t = await openTestDatabase("postgres");
  });
  afterEach(async () => {
    await t?.close();
  });
  const db = () => t!.db;

  it("a heartbeat that started before an acquisition does not stop the new chat's runner", async () => {
    const { fake, setup, worker } = await env(db, { heartbeatMs: 50, leaseMs: 60_000 });
    fake.respond(() => SLOW);
    const first = await startChat(db(), setup, "first");
    await until(() => worker.ownedChats.includes(first), 10_000);
    // Hold the first chat's lease row: the next heartbeat statement takes its snapshot, then
    // waits on the lock while the worker acquires a second chat.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = db().transaction(async (tx) => {
      await tx.query("SELECT 1 FROM chat_heartbeats WHERE chat_id = $1 FOR UPDATE", [first]);
      locked();
      await gate;
    });
    await isLocked;
    await new Promise((r) => setTimeout(r, 200)); // a heartbeat is now waiting on the lock
    const second = await startChat(db(), setup, "second");
    await until(() => worker.ownedChats.includes(second), 10_000);
    release();
    await holding;
    fake.respond(() => ({ text: "done" }));
    const { chat } = await settle(db(), second, 20_000);
    expect(chat.status).toBe("waiting");
    expect((await loadHistory(db(), second)).map((m) => m.role)).toEqual(["user", "assistant"]);
  });
});
