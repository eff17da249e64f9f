// Tool time billing (CHATD.md 9) through the real loop: real agents and processes, the fake
// provider, and the worker on a ManualClock, so every figure is exact. Each command waits for
// a file the test creates, so the test decides when on the clock each call ends.

import { writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import type { Database } from "../../src/chatd/db/index.ts";
import { interrupt, loadChat } from "../../src/chatd/transitions/index.ts";
import { ManualClock } from "../../src/contract/index.ts";
import { until, type TestAgent } from "../support/agent.ts";
import { results, settle, startChat, testWorker, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env, cleanup } = useLoops();

function usage(history: ChatMessage[]) {
  return history.flatMap((m) => m.content.filter((p) => p.type === "tool-batch-usage"));
}

/** A foreground execute that runs until `release(name)`; its timeout is far away. */
function gated(agent: TestAgent, name: string) {
  const gate = path.join(agent.dir, `go-${name}`);
  return {
    id: name,
    name: "execute",
    args: { command: `while [ ! -e ${gate} ]; do sleep 0.02; done; echo ${name}`, timeout: "1h" },
  };
}

async function release(agent: TestAgent, name: string): Promise<void> {
  await writeFile(path.join(agent.dir, `go-${name}`), "");
}

async function runningCount(agent: TestAgent): Promise<number> {
  return agent.allProcesses().filter((p) => p.running).length;
}

/** The runtime of each tool result message, in call order. */
function resultRuntimes(history: ChatMessage[]): number[] {
  return history
    .filter((m) => m.content.some((p) => p.type === "tool-result"))
    .map((m) => m.runtimeMs);
}

describeDatabases("tool batch billing", (db) => {
  it("two calls of 10 s and 60 s in parallel bill 60 s for 2 calls", async () => {
    const clock = new ManualClock();
    const buffer = new StreamBuffer();
    const { agent, fake, setup } = await env(db, { clock, buffer });
    fake.script({ toolCalls: [gated(agent, "short"), gated(agent, "long")] }, { text: "done" });
    const chatId = await startChat(db(), setup, "go");
    await until(async () => (await runningCount(agent)) === 2, 10_000);
    clock.advance(10_000);
    await release(agent, "short");
    await until(() => callEnded(db(), buffer, chatId, "short"), 10_000);
    clock.advance(50_000);
    await release(agent, "long");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history).map((r) => r.status)).toEqual(["completed", "completed"]);
    expect(usage(history)).toEqual([
      { type: "tool-batch-usage", billed_ms: 60_000, billed_calls: 2 },
    ]);
    const record = history.find((m) => m.content.some((p) => p.type === "tool-batch-usage"));
    expect(record).toMatchObject({ runtimeMs: 60_000, visibility: "model" });
    // Each result shows its own call's time; only the record's union is billed.
    expect(resultRuntimes(history)).toEqual([10_000, 60_000]);
  });

  it("interrupted: a call completed at 3 s plus one running until the interrupt at 7 s bill 7 s", async () => {
    const clock = new ManualClock();
    const buffer = new StreamBuffer();
    const { agent, fake, setup } = await env(db, { clock, buffer });
    fake.script({ toolCalls: [gated(agent, "done"), gated(agent, "running")] });
    const chatId = await startChat(db(), setup, "go");
    await until(async () => (await runningCount(agent)) === 2, 10_000);
    clock.advance(3_000);
    await release(agent, "done");
    await until(() => callEnded(db(), buffer, chatId, "done"), 10_000);
    clock.advance(4_000);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history).map((r) => r.status)).toEqual(["completed", "canceled"]);
    expect(usage(history)).toEqual([
      { type: "tool-batch-usage", billed_ms: 7_000, billed_calls: 2 },
    ]);
    expect(resultRuntimes(history)).toEqual([3_000, 7_000]);
  });

  it("a call whose task is retried mid-command on the same replica bills from its first start, not from the retry", async () => {
    const clock = new ManualClock();
    const buffer = new StreamBuffer();
    const { agent, fake, setup } = await env(db, { clock, buffer, attemptTimeoutMs: 10_000 });
    fake.script({ toolCalls: [gated(agent, "long")] }, { text: "done" });
    const chatId = await startChat(db(), setup, "go");
    await until(async () => (await runningCount(agent)) === 1, 10_000);
    // The attempt runs out of time at 10 s: the task is retried (after its backoff).
    clock.advance(10_000);
    await until(async () => (await loadChat(db(), chatId))!.retryState !== null, 10_000);
    clock.advance(1_000);
    await until(() => callStarted(db(), buffer, chatId, "long"), 10_000);
    await new Promise((r) => setTimeout(r, 300)); // the retry is waiting for the exit again
    clock.advance(9_000); // within the second attempt's 10 s
    await release(agent, "long");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history).map((r) => r.status)).toEqual(["completed"]);
    expect(await runningCount(agent)).toBe(0);
    // 20 s of the command's life on this replica's clock, not the 9 s since the retry.
    expect(usage(history)).toEqual([
      { type: "tool-batch-usage", billed_ms: 20_000, billed_calls: 1 },
    ]);
    expect(resultRuntimes(history)).toEqual([20_000]);
  });

  it("a batch this replica never ran (taken over after a crash) bills nothing when interrupted", async () => {
    const { agent, fake, setup, worker } = await env(db);
    fake.script({ toolCalls: [gated(agent, "orphan")] });
    const chatId = await startChat(db(), setup, "go");
    await until(async () => (await runningCount(agent)) === 1, 10_000);
    // The replica goes away; the interrupt is handled by a fresh one with no live stamps.
    await worker.stop();
    await interrupt(db(), chatId);
    const other = testWorker(db());
    await other.start();
    cleanup.push(() => other.stop());
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([expect.objectContaining({ status: "canceled" })]);
    expect(usage(history)).toEqual([]);
  });
});

/** Whether this replica's batch holds a stamp for call `toolCallId` (it was sent). */
async function callStarted(
  db: Database,
  buffer: StreamBuffer,
  chatId: string,
  toolCallId: string,
): Promise<boolean> {
  const chat = await loadChat(db, chatId);
  return buffer.batch(chatId, chat!.historyVersion)?.get(toolCallId) !== undefined;
}

/** Whether this replica has stamped the end of call `toolCallId` of the chat's batch. */
async function callEnded(
  db: Database,
  buffer: StreamBuffer,
  chatId: string,
  toolCallId: string,
): Promise<boolean> {
  const chat = await loadChat(db, chatId);
  return buffer.batch(chatId, chat!.historyVersion)?.get(toolCallId)?.endedAt !== undefined;
}
