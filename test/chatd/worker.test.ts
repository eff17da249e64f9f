// The worker under the faults the chaos campaign found (test/chaos): a stop or an attempt
// timeout in the middle of a model stream, and a heartbeat racing an acquisition.

import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AgentPool } from "../../src/chatd/agents.ts";
import { ChatRefusedError } from "../../src/chatd/chats.ts";
import { loadSnapshot } from "../../src/chatd/prompt/index.ts";
import { ephemeralSecretBox } from "../../src/chatd/secrets/index.ts";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import { createChat, loadHistory } from "../../src/chatd/transitions/index.ts";
import type { AgentClient } from "../../src/contract/index.ts";
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

  it("a chat created with the worker's claim has its agent asked for the context ahead of the create, once", async () => {
    const asked: string[] = [];
    const pool = new AgentPool(db(), {
      secrets: ephemeralSecretBox(),
      onRequest: (r) => asked.push(r.route),
    });
    const { fake, setup, worker, agent } = await env(db, {
      acquireIntervalMs: 60_000,
      resolveAgent: async (chat) =>
        chat.workspaceId ? pool.forWorkspace(chat.workspaceId) : undefined,
      agentForUser: (workspaceId, userId) => pool.forUser(workspaceId, userId),
    });
    const contexts = () => asked.filter((r) => r === "GET /api/v0/context").length;
    const member = randomUUID();
    await db().query(
      "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'member', 'x')",
      [member, `${member}@test`],
    );
    const input = { workspaceId: setup.workspaceId, modelConfigId: setup.modelConfigId };
    // A member the workspace is not shared with: refused, and their claim asks the agent nothing.
    const refused = worker.localClaim({ ...input, ownerId: member, message: "go" })!;
    await expect(
      createChat(db(), { ...input, ownerId: member, message: "go" }, refused),
    ).rejects.toThrow(ChatRefusedError);
    fake.script({ text: "asked ahead" });
    const claim = worker.localClaim({ ...input, ownerId: setup.userId, message: "go" })!;
    // The agent has answered before the create statement is even sent.
    await until(() => contexts() === 1, 10_000);
    const chat = await createChat(db(), { ...input, ownerId: setup.userId, message: "go" }, claim);
    claim.committed();
    const { chat: done, history } = await settle(db(), chat.id);
    expect(done.status).toBe("waiting");
    expect(history.at(-1)!.content).toEqual([{ type: "text", text: "asked ahead" }]);
    // The first step's prompt has that answer, and the agent was not asked again.
    expect(JSON.stringify(fake.requests[0]!.messages)).toContain(
      `- Workspace directory: ${agent.dir}`,
    );
    expect(contexts()).toBe(1);
    expect((await loadSnapshot(db(), chat.id))?.snapshot.environment?.directory).toBe(agent.dir);
  });

  it("a new chat's first model step goes out with the workspace's last snapshot, before the agent answers", async () => {
    const pool = new AgentPool(db(), { secrets: ephemeralSecretBox() });
    // The agent's context answers wait for `gate`.
    let gate: Promise<void> = Promise.resolve();
    const gated = (c: AgentClient | undefined): AgentClient | undefined =>
      c &&
      new Proxy(c, {
        get(target, key) {
          if (key === "context")
            return async (o?: Parameters<AgentClient["context"]>[0]) => {
              await gate;
              return target.context(o);
            };
          const v: unknown = Reflect.get(target, key, target);
          return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    const { fake, setup, worker, agent } = await env(db, {
      acquireIntervalMs: 60_000,
      resolveAgent: async (chat) =>
        chat.workspaceId ? gated(await pool.forWorkspace(chat.workspaceId)) : undefined,
      agentForUser: async (workspaceId, userId) => gated(await pool.forUser(workspaceId, userId)),
    });
    fake.respond(() => ({ text: "answer" }));
    const input = {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    };
    /** A chat created with the worker's claim; `sent` requests in all before the create. */
    const start = async (sent?: number): Promise<string> => {
      const claim = worker.localClaim({ ...input, message: "go" })!;
      if (sent !== undefined) await until(() => fake.requests.length === sent, 10_000);
      const chat = await createChat(db(), { ...input, message: "go" }, claim);
      claim.committed();
      return chat.id;
    };
    const answered = async (chatId: string): Promise<void> => {
      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("waiting");
      expect(history.map((m) => m.role)).toEqual(["user", "assistant"]);
    };
    // The workspace's first chat here: its step waits for the agent (nothing is known yet).
    await answered(await start());
    expect(fake.requests).toHaveLength(1);
    // The next one's step goes out while the agent's answer is held, and is taken: one request.
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    const second = await start(2);
    open();
    await answered(second);
    expect(fake.requests).toHaveLength(2);
    // Its instructions changed since: the step sent ahead is dropped, and the one that counts
    // reads them.
    await writeFile(path.join(agent.dir, "AGENTS.md"), "Always answer in haiku.");
    await answered(await start(3));
    expect(fake.requests).toHaveLength(4);
    expect(JSON.stringify(fake.requests[2]!.messages)).not.toContain("haiku");
    expect(JSON.stringify(fake.requests[3]!.messages)).toContain("Always answer in haiku.");
    // A model disabled since is sent nothing for a chat that names it (the create refuses it).
    await db().query("UPDATE model_configs SET enabled = false WHERE id = $1", [
      setup.modelConfigId,
    ]);
    const refused = worker.localClaim({ ...input, message: "go" })!;
    await new Promise((r) => setTimeout(r, 300));
    await expect(createChat(db(), { ...input, message: "go" }, refused)).rejects.toThrow(
      ChatRefusedError,
    );
    expect(fake.requests).toHaveLength(4);
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
