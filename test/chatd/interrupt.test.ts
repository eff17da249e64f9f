// The interrupt task end to end (CHATD.md 8, 9): a real agent with real processes, the fake
// provider, the worker; each chat is interrupted through the transition once the agent shows
// its process running, and must end in `waiting` with one honest result per call.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import http from "node:http";
import { randomInt } from "node:crypto";
import { expect, it } from "vitest";
import type { ChatMessage, MessagePart } from "../../src/chatd/messages.ts";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import {
  editMessage,
  interrupt,
  loadChat,
  loadHistory,
} from "../../src/chatd/transitions/index.ts";
import { ManualClock, type ProcessInfo } from "../../src/contract/index.ts";
import { until, type TestAgent } from "../support/agent.ts";
import { results, settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env, cleanup } = useLoops();

/** A sleep duration no other test uses, so pgrep finds only this test's process. */
function uniqueSleep(): string {
  return `30.${randomInt(100_000, 999_999)}`;
}

function sleepRunning(duration: string): boolean {
  return spawnSync("pgrep", ["-f", `sleep ${duration}`]).status === 0;
}

async function processWith(agent: TestAgent, text: string): Promise<ProcessInfo | undefined> {
  const processes = agent.allProcesses();
  return processes.find((p) => p.command.includes(text));
}

/** Waits until the agent shows a process whose command contains `text` running. */
async function running(agent: TestAgent, text: string): Promise<ProcessInfo> {
  await until(async () => (await processWith(agent, text))?.running === true, 10_000);
  return (await processWith(agent, text))!;
}

function usage(history: ChatMessage[]) {
  return history.flatMap((m) => m.content.filter((p) => p.type === "tool-batch-usage"));
}

describeDatabases("interrupt", (db) => {
  it("US2: a foreground command is canceled with its partial output and killed", async () => {
    const { agent, fake, setup } = await env(db);
    const d = uniqueSleep();
    fake.script({
      toolCalls: [
        {
          id: "x",
          name: "execute",
          args: { command: `echo early; sleep ${d}; echo late`, timeout: "60s" },
        },
      ],
    });
    const chatId = await startChat(db(), setup, "go");
    const p = await running(agent, `sleep ${d}`);
    await until(async () => (await agent.client.processOutput(p.id)).output.includes("early"));
    await new Promise((r) => setTimeout(r, 200));
    expect(await interrupt(db(), chatId)).toBe("interrupting");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    const [r] = results(history);
    expect(r).toMatchObject({ status: "canceled", output: "early\n" });
    expect(r!.note).toMatch(/Canceled by the user after \d+\.\d s/);
    expect(JSON.stringify(history)).not.toContain("interrupted before it produced a result");
    await until(() => !sleepRunning(d), 3_000);
    // The batch ran until the interrupt: it is billed.
    expect(usage(history)).toEqual([expect.objectContaining({ billed_calls: 1 })]);
    expect(fake.requests).toHaveLength(1);
  });

  it("US6, mixed batch: background work and a command past its timeout survive, a finished call keeps its result, a running one is canceled", async () => {
    const { agent, fake, setup } = await env(db);
    const [bg, late, fg] = [uniqueSleep(), uniqueSleep(), uniqueSleep()];
    fake.script({
      toolCalls: [
        { id: "bg", name: "execute", args: { command: `sleep ${bg}`, run_in_background: true } },
        { id: "late", name: "execute", args: { command: `sleep ${late}`, timeout: "1s" } },
        { id: "fg", name: "execute", args: { command: `sleep ${fg}`, timeout: "60s" } },
        { id: "quick", name: "execute", args: { command: "echo finished-first" } },
      ],
    });
    const chatId = await startChat(db(), setup, "go");
    await running(agent, `sleep ${bg}`);
    await until(async () => (await processWith(agent, "finished-first"))?.running === false);
    const latePs = await running(agent, `sleep ${late}`);
    await running(agent, `sleep ${fg}`);
    await new Promise((r) => setTimeout(r, 1_500)); // "late" is past its 1 s timeout
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toHaveLength(4);
    const [b, l, f, q] = results(history);
    expect(q).toMatchObject({ status: "completed", exit_code: 0, output: "finished-first\n" });
    expect(b).toMatchObject({ status: "background", process_id: expect.any(String) });
    expect(l).toMatchObject({ status: "timed_out", process_id: latePs.id });
    expect(f).toMatchObject({ status: "canceled" });
    expect((await agent.client.processOutput(String(b!.process_id))).running).toBe(true);
    expect((await agent.client.processOutput(latePs.id)).running).toBe(true);
    expect(sleepRunning(bg) && sleepRunning(late)).toBe(true);
    await until(() => !sleepRunning(fg), 3_000);
    for (const id of [String(b!.process_id), latePs.id])
      await agent.client.signalProcess(id, "kill");
    await until(() => !sleepRunning(bg) && !sleepRunning(late), 3_000);
  });

  it("a call that exited before the cancel gets its real result; the batch is billed", async () => {
    const { agent, fake, setup } = await env(db);
    const d = uniqueSleep();
    fake.script({
      toolCalls: [
        { id: "quick", name: "execute", args: { command: "echo done; exit 4" } },
        { id: "slow", name: "execute", args: { command: `sleep ${d}`, timeout: "60s" } },
      ],
    });
    const chatId = await startChat(db(), setup, "go");
    await running(agent, `sleep ${d}`);
    await until(async () => (await processWith(agent, "exit 4"))?.running === false);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 4, output: "done\n" }),
      expect.objectContaining({ status: "canceled" }),
    ]);
    expect(usage(history)).toEqual([expect.objectContaining({ billed_calls: 2 })]);
    await until(() => !sleepRunning(d), 3_000);
  });

  it("US7: with a silent agent the interrupt finishes within the answer timeout, unknown", async () => {
    const silent = http.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanup.push(() => {
      silent.closeAllConnections();
      return new Promise((r) => silent.close(() => r()));
    });
    const { agent, fake, setup } = await env(db, { agentAnswerTimeoutMs: 400 });
    const d = uniqueSleep();
    fake.script({
      toolCalls: [{ id: "x", name: "execute", args: { command: `sleep ${d}`, timeout: "60s" } }],
    });
    const chatId = await startChat(db(), setup, "go");
    const p = await running(agent, `sleep ${d}`);
    const port = (silent.address() as { port: number }).port;
    await db().query("UPDATE workspaces SET agent_url = $2 WHERE id = $1", [
      setup.workspaceId,
      `http://127.0.0.1:${port}`,
    ]);
    const asked = Date.now();
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(Date.now() - asked).toBeLessThan(3_000);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "agent_no_answer", process_id: p.id }),
    ]);
    await agent.client.signalProcess(p.id, "kill");
  });

  it("keeps the text the model streamed before the interrupt as a partial assistant message", async () => {
    const buffer = new StreamBuffer();
    const { fake, setup } = await env(db, { buffer });
    fake.script({ text: "Let me think about this carefully", hangAfterChunks: 3 });
    const chatId = await startChat(db(), setup, "go");
    await until(() => buffer.parts(chatId).some((e) => e.part.type === "text-delta"), 10_000);
    await new Promise((r) => setTimeout(r, 50));
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => m.role)).toEqual(["user", "assistant"]);
    const text = history[1]!.content.find((p) => p.type === "text");
    expect(text).toMatchObject({ type: "text", text: expect.stringMatching(/^Let/) });
    expect(history[1]!.runtimeMs).toBeGreaterThan(0);
    expect(buffer.parts(chatId)).toEqual([]);
  });

  it("a timed-out attempt's streamed text is neither kept nor billed when the user interrupts its retry's wait", async () => {
    // CHATD.md 9: retried and errored attempts bill nothing. The attempt streams a few words,
    // hangs and times out; the retry waits a minute on the manual clock; the interrupt comes then.
    const clock = new ManualClock();
    const buffer = new StreamBuffer();
    const { fake, setup } = await env(db, {
      buffer,
      clock,
      attemptTimeoutMs: 5_000,
      backoffMinMs: 60_000,
      backoffMaxMs: 60_000,
    });
    fake.script({ text: "Let me think about this carefully", hangAfterChunks: 3 });
    const chatId = await startChat(db(), setup, "go");
    await until(() => buffer.parts(chatId).some((e) => e.part.type === "text-delta"), 10_000);
    clock.advance(5_000); // the attempt times out
    await until(async () => (await loadChat(db(), chatId))!.retryState !== null, 10_000);
    clock.advance(4_000);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => m.role)).toEqual(["user"]);
    expect(history.reduce((ms, m) => ms + m.runtimeMs, 0)).toBe(0);
  });

  it("keeps complete tool calls streamed before the interrupt, each with a result saying it did not run", async () => {
    const buffer = new StreamBuffer();
    const { agent, fake, setup } = await env(db, { buffer });
    // The Responses API completes each tool call mid-stream (chat completions complete them
    // only when the stream ends): created, the message's 4 events, each call's 5, then a hang
    // before the end, so nothing is committed.
    await db().query("UPDATE model_configs SET provider = 'openai' WHERE id = $1", [
      setup.modelConfigId,
    ]);
    const marker = `${agent.dir}/ran.txt`;
    fake.script({
      text: "Running both.",
      toolCalls: [
        { id: "exec", name: "execute", args: { command: `touch ${marker}` } },
        { id: "write", name: "write_file", args: { path: marker, content: "x" } },
      ],
      hangAfterChunks: 15,
    });
    const chatId = await startChat(db(), setup, "go");
    await until(
      () => buffer.parts(chatId).filter((e) => e.part.type === "tool-call").length === 2,
      10_000,
    );
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool"]);
    expect(history[1]!.content.map((p) => p.type)).toEqual(["text", "tool-call", "tool-call"]);
    expect(history[1]!.runtimeMs).toBeGreaterThan(0);
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "not_run" }),
      expect.objectContaining({ status: "not_applied" }),
    ]);
    // Never sent: nothing ran, nothing is billed for tools.
    expect(existsSync(marker)).toBe(false);
    expect(agent.allProcesses()).toEqual([]);
    expect(usage(history)).toEqual([]);
  });

  it("an interrupt with nothing streamed and no calls just ends the turn", async () => {
    const buffer = new StreamBuffer();
    const { fake, setup } = await env(db, { buffer });
    fake.script({ text: "never", hangAfterChunks: 0 });
    const chatId = await startChat(db(), setup, "go");
    await until(() => fake.requests.length === 1, 10_000);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(history.map((m) => m.role)).toEqual(["user"]);
  });
});

describeDatabases("message edits", (db) => {
  it("an edit during a tool call cancels it, discards the branch, and runs from the edit", async () => {
    const { agent, fake, setup } = await env(db);
    const d = uniqueSleep();
    fake.script(
      {
        toolCalls: [
          { id: "x", name: "execute", args: { command: `echo early; sleep ${d}`, timeout: "60s" } },
        ],
      },
      { text: "Fresh start." },
    );
    const chatId = await startChat(db(), setup, "first");
    const [first] = await loadHistory(db(), chatId);
    await running(agent, `sleep ${d}`);
    expect(await editMessage(db(), chatId, setup.userId, first!.id, "second")).toEqual({
      queued: true,
    });
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    // History now starts again from the edit.
    expect(history.map((m) => [m.role, m.content])).toEqual([
      ["user", [{ type: "text", text: "second" }]],
      ["assistant", [{ type: "text", text: "Fresh start." }]],
    ]);
    expect(fake.requests[1]!.messages.filter((m) => m.role === "user")).toEqual([
      expect.objectContaining({ content: "second" }),
    ]);
    // The discarded branch: the call got exactly one result, the real one, before it went.
    const all = await db().query<{ content: MessagePart[]; deleted: boolean }>(
      "SELECT content, deleted FROM chat_messages WHERE chat_id = $1 ORDER BY id",
      [chatId],
    );
    const discarded = all.rows.filter((r) => r.deleted).flatMap((r) => r.content);
    expect(discarded.filter((p) => p.type === "tool-call").map((p) => p.tool_call_id)).toEqual([
      "x",
    ]);
    const got = discarded.filter((p) => p.type === "tool-result");
    expect(got).toEqual([
      expect.objectContaining({
        tool_call_id: "x",
        result: expect.objectContaining({ status: "canceled", output: "early\n" }),
      }),
    ]);
    await until(() => !sleepRunning(d), 3_000);
  });

  it("an edit while waiting answers outstanding calls first, then starts from the edit", async () => {
    const { fake, setup } = await env(db);
    fake.script({ text: "Again." });
    const chatId = await startChat(db(), setup, "first");
    await settle(db(), chatId);
    // A turn that ended (an error, say) with a call committed but never answered.
    await db().query(
      `INSERT INTO chat_messages (chat_id, role, visibility, content) VALUES ($1, 'assistant', 'both', $2)`,
      [
        chatId,
        JSON.stringify([
          {
            type: "tool-call",
            tool_call_id: "lost",
            tool_name: "execute",
            args: { command: "true" },
          },
        ]),
      ],
    );
    const [first] = await loadHistory(db(), chatId);
    const sent = await editMessage(db(), chatId, setup.userId, first!.id, "redo");
    expect(sent.queued).toBe(false);
    const { history } = await settle(db(), chatId);
    expect(history.map((m) => m.role)).toEqual(["user", "assistant"]);
    const lost = await db().query<{ content: MessagePart[] }>(
      "SELECT content FROM chat_messages WHERE chat_id = $1 AND deleted AND role = 'tool'",
      [chatId],
    );
    expect(lost.rows.flatMap((r) => r.content)).toEqual([
      expect.objectContaining({
        tool_call_id: "lost",
        result: expect.objectContaining({ status: "unknown" }),
      }),
    ]);
  });
});

describeDatabases("interrupt before the agent receives the call", (db) => {
  it("US10: the result is not run, and the start still in transit gets tool_call_canceled and runs nothing", async () => {
    const { fake, setup, agent } = await env(db);
    // A proxy in front of the agent that holds every start (it is still in transit) and
    // passes everything else through; it records what the agent answers to each start.
    const held: (() => void)[] = [];
    const startAnswers: string[] = [];
    const proxy = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const forward = () => {
          const { connection: _c, host: _h, ...headers } = req.headers;
          const out = http.request(
            new URL(req.url!, agent.url),
            { method: req.method, headers, agent: false },
            (up) => {
              const body: Buffer[] = [];
              up.on("data", (c: Buffer) => body.push(c));
              up.on("end", () => {
                const text = Buffer.concat(body);
                if (req.url === "/api/v0/processes/start")
                  startAnswers.push(`${up.statusCode} ${text.toString()}`);
                if (res.destroyed) return; // the sender stopped waiting long ago
                res.writeHead(up.statusCode ?? 502, up.headers);
                res.end(text);
              });
            },
          );
          out.on("error", () => res.destroy());
          out.end(Buffer.concat(chunks));
        };
        if (req.url === "/api/v0/processes/start") held.push(forward);
        else forward();
      });
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    cleanup.push(() => {
      proxy.closeAllConnections();
      return new Promise<void>((r) => proxy.close(() => r()));
    });
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    await db().query("UPDATE workspaces SET agent_url = $2 WHERE id = $1", [
      setup.workspaceId,
      proxyUrl,
    ]);
    const marker = `${agent.dir}/ran.txt`;
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: `touch ${marker}` } }] },
      { text: "ok" },
    );
    const chatId = await startChat(db(), setup, "go");
    await until(() => held.length === 1, 10_000);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([expect.objectContaining({ status: "not_run" })]);
    expect(usage(history)).toEqual([]); // an unstarted call bills nothing
    held.splice(0).forEach((forward) => forward());
    await until(() => startAnswers.length === 1, 5_000);
    expect(startAnswers[0]).toMatch(/^409 .*"code":"tool_call_canceled"/);
    expect(existsSync(marker)).toBe(false);
    expect(agent.allProcesses()).toEqual([]);
  });
});
