// The durable chat loop end to end: the worker, the real openai-compatible provider against
// the fake provider server, a real agent and real processes, on PGlite and on Postgres.

import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import path from "node:path";
import { expect, it } from "vitest";
import type { Database } from "../../src/chatd/db/index.ts";
import { StreamBuffer, type LivePart } from "../../src/chatd/stream.ts";
import { createChat, interrupt, sendMessage } from "../../src/chatd/transitions/index.ts";
import type { Worker } from "../../src/chatd/worker/worker.ts";
import { parseChatId, toMessageId, toolCallUuid } from "../../src/contract/index.ts";
import type { TestAgent } from "../support/agent.ts";
import { results, settle, startChat, testWorker, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";
import type { FakeProvider } from "../support/fake-provider.ts";

const { env, cleanup } = useLoops();
/** How long a test holds a batch's results commit once the next request is out. */
const COMMIT_HELD_MS = 200;

/** The text of the last tool result the model was sent, parsed. */
function lastToolResultSent(fake: FakeProvider): Record<string, unknown> {
  const req = fake.requests.at(-1)!;
  const toolMsgs = (req.messages as { role: string; content: unknown }[]).filter(
    (m) => m.role === "tool",
  );
  return JSON.parse(String(toolMsgs.at(-1)!.content)) as Record<string, unknown>;
}

/** `d`, running `hook` before each statement that commits a batch's results. */
function beforeResultsCommit(d: Database, hook: () => Promise<void>): Database {
  return new Proxy(d, {
    get(target, key) {
      if (key === "query")
        return async (sql: string, params?: unknown[]) => {
          const results = params?.some((p) => typeof p === "string" && p.includes("tool-result"));
          if (/UPDATE chats SET/.test(sql) && results) await hook();
          return target.query(sql, params);
        };
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describeDatabases("chat loop", (db) => {
  it("the model runs a foreground execute and gets the exit code and output; watchers see it live", async () => {
    const buffer = new StreamBuffer();
    const { fake, setup, agent } = await env(db, { buffer });
    fake.script(
      { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi; exit 3" } }] },
      { text: "Done." },
    );
    const { id: chatId } = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    const live: string[] = [];
    const started: LivePart[] = [];
    const unsubscribe = buffer.subscribe(chatId, (e) => {
      if (e.part.type !== "text-delta")
        live.push(`${e.part.type} ${"status" in e.part ? e.part.status : ""}`.trim());
      if (e.part.type === "tool-started") started.push(e.part);
    });
    await sendMessage(db(), chatId, setup.userId, "run it", "queue");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 3, output: "hi\n" }),
    ]);
    expect(lastToolResultSent(fake)).toMatchObject({ status: "completed", exit_code: 3 });
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    const usage = history[3]!.content[0]!;
    expect(usage).toMatchObject({ type: "tool-batch-usage", billed_calls: 1 });
    expect(history[1]!.runtimeMs).toBeGreaterThanOrEqual(0);
    unsubscribe();
    expect(live).toEqual(["tool-call", "tool-started", "tool-finished completed"]);
    // The process is named by the tool call UUID, so a watcher can read its output while it runs.
    const processId = toolCallUuid(parseChatId(chatId)!, toMessageId(history[1]!.id)!, "call_1");
    expect(started).toEqual([
      {
        type: "tool-started",
        tool_call_id: "call_1",
        tool_name: "execute",
        process_id: processId,
      },
    ]);
    expect(await agent.client.processOutput(processId)).toMatchObject({ output: "hi\n" });
  });

  it("the model's request that reads a batch's results goes out while they commit", async () => {
    // The results' commit waits (3 s at most) for the provider to have the next request: in the
    // order commit-then-request it never comes first.
    let requests: () => number = () => 0;
    let requestsAtCommit: number | undefined;
    const holdingResults = (d: Database): Database =>
      beforeResultsCommit(d, async () => {
        const deadline = Date.now() + 3_000;
        while (requests() < 2 && Date.now() < deadline) await sleep(10);
        requestsAtCommit = requests();
        await sleep(COMMIT_HELD_MS);
      });
    const { fake, setup } = await env(() => holdingResults(db()));
    requests = () => fake.requests.length;
    fake.script(
      { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }] },
      { text: "Done." },
    );
    const chatId = await startChat(db(), setup, "run it");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(requestsAtCommit).toBe(2);
    // The request sent ahead was the step's: no other was made, and it read the results.
    expect(fake.requests).toHaveLength(2);
    expect(lastToolResultSent(fake)).toMatchObject({ status: "completed", output: "hi\n" });
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(history.at(-1)!.content).toEqual([{ type: "text", text: "Done." }]);
    // Its model window starts once the results are committed, as if it had gone out then: the
    // time the answer waited on the commit is not billed (CHATD.md 9, docs/architecture.md).
    const [results, answer] = [history[3]!, history[4]!];
    const span = answer.createdAt.getTime() - results.createdAt.getTime();
    expect(answer.runtimeMs).toBeLessThan(COMMIT_HELD_MS);
    expect(answer.runtimeMs).toBeLessThanOrEqual(span);
  });

  it("an interruption while the results commit drops the step sent ahead: aborted, nothing of it kept", async () => {
    // Once the step that reads the results is at the provider, the user interrupts, and then
    // the results' commit goes on: its fence no longer holds.
    let requests: () => number = () => 0;
    let chatId = "";
    let interrupted = false;
    const interruptingResults = (d: Database): Database =>
      beforeResultsCommit(d, async () => {
        if (interrupted) return;
        interrupted = true;
        const deadline = Date.now() + 3_000;
        while (requests() < 2 && Date.now() < deadline) await sleep(10);
        await interrupt(d, chatId);
      });
    const { fake, setup } = await env(() => interruptingResults(db()));
    requests = () => fake.requests.length;
    fake.script(
      { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }] },
      { text: "never kept", hangAfterChunks: 1 },
    );
    chatId = await startChat(db(), setup, "run it");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(interrupted).toBe(true);
    expect(fake.requests).toHaveLength(2);
    // The provider saw the step sent ahead left mid-answer, and nothing of it is in history.
    const deadline = Date.now() + 3_000;
    while (!fake.abandoned.includes(1) && Date.now() < deadline) await sleep(10);
    expect(fake.abandoned).toContain(1);
    expect(JSON.stringify(history)).not.toContain("never");
    expect(history.filter((m) => m.role === "assistant")).toHaveLength(1);
    expect(results(history)).toHaveLength(1);
  });

  it("execute past its timeout is left running with its process ID, and process_output reads it later", async () => {
    const { fake, setup } = await env(db);
    fake.script(
      {
        toolCalls: [
          {
            id: "call_1",
            name: "execute",
            args: { command: "sleep 1.5; echo late", timeout: "1s" },
          },
        ],
      },
      (req) => {
        const sent = (req.messages as { role: string; content: unknown }[])
          .filter((m) => m.role === "tool")
          .at(-1)!;
        const r = JSON.parse(String(sent.content)) as { process_id: string };
        return {
          toolCalls: [
            {
              id: "call_2",
              name: "process_output",
              args: { process_id: r.process_id, wait_timeout: "5s" },
            },
          ],
        };
      },
      { text: "It finished." },
    );
    const chatId = await startChat(db(), setup, "run it");
    const { history } = await settle(db(), chatId);
    const [first, second] = results(history);
    expect(first).toMatchObject({ status: "timed_out", process_id: expect.any(String) });
    expect(second).toMatchObject({ status: "completed", exit_code: 0, output: "late\n" });
  });

  it("a background execute answers at once and the process keeps running", async () => {
    const { fake, setup, agent } = await env(db);
    fake.script(
      {
        toolCalls: [
          { id: "b", name: "execute", args: { command: "sleep 30", run_in_background: true } },
        ],
      },
      { text: "ok" },
    );
    const chatId = await startChat(db(), setup, "run it");
    const { history } = await settle(db(), chatId);
    const [r] = results(history);
    expect(r).toMatchObject({ status: "background", process_id: expect.any(String) });
    expect((await agent.client.processOutput(String(r!.process_id))).running).toBe(true);
  });

  it("write_file, then read_file, then edit_files", async () => {
    const { fake, setup, agent } = await env(db);
    const file = path.join(agent.dir, "notes.txt");
    fake.script(
      {
        toolCalls: [
          { id: "w", name: "write_file", args: { path: file, content: "alpha\nbeta\n" } },
        ],
      },
      { toolCalls: [{ id: "r", name: "read_file", args: { path: file } }] },
      {
        toolCalls: [
          {
            id: "e",
            name: "edit_files",
            args: { files: [{ path: file, edits: [{ old_text: "beta", new_text: "gamma" }] }] },
          },
        ],
      },
      { text: "edited" },
    );
    const chatId = await startChat(db(), setup, "go");
    const { history } = await settle(db(), chatId);
    const [w, r, e] = results(history);
    expect(w).toMatchObject({ status: "applied" });
    expect(JSON.stringify(r)).toContain("beta");
    expect(e).toMatchObject({ status: "applied" });
    expect(await readFile(file, "utf8")).toBe("alpha\ngamma\n");
  });

  it("US1/US4: an attempt that times out mid-execute is retried without a second process", async () => {
    const { fake, setup, agent } = await env(db, { attemptTimeoutMs: 300 });
    const file = path.join(agent.dir, "log.txt");
    // By what the model was sent, not in turn: under load a first attempt can time out even
    // before the command (its answer then is not the model's), and is asked again.
    fake.respond((req) =>
      req.messages.some((m) => m.role === "tool")
        ? { text: "ok" }
        : {
            toolCalls: [
              {
                id: "x",
                name: "execute",
                args: { command: `echo line >> ${file}; sleep 1.2`, timeout: "10s" },
              },
            ],
          },
    );
    const chatId = await startChat(db(), setup, "go");
    const { history } = await settle(db(), chatId);
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0 }),
    ]);
    expect(await readFile(file, "utf8")).toBe("line\n");
  });

  it("US5: an agent that cannot be reached gives unknown within the answer timeout", async () => {
    const { fake, setup } = await env(db, { agentAnswerTimeoutMs: 500 });
    await db().query("UPDATE workspaces SET agent_url = 'http://127.0.0.1:1' WHERE id = $1", [
      setup.workspaceId,
    ]);
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] },
      { text: "ok" },
    );
    const chatId = await startChat(db(), setup, "go");
    const { history } = await settle(db(), chatId);
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "agent_unreachable" }),
    ]);
  });
});

export type { Worker, TestAgent };

describeDatabases("chat loop under faults", (db) => {
  it("US5: an agent that restarted after the call was committed gives unknown naming the restart", async () => {
    const { fake, setup } = await env(db);
    // The call was committed an hour ago; this agent has been up a minute: it cannot know.
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] },
      { text: "ok" },
    );
    const { createChat } = await import("../../src/chatd/transitions/index.ts");
    const chat = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    await db().query(
      `INSERT INTO chat_messages (chat_id, role, visibility, content, created_at) VALUES
         ($1, 'user', 'both', '[{"type":"text","text":"go"}]', now() - interval '1 hour'),
         ($1, 'assistant', 'both', '[{"type":"tool-call","tool_call_id":"old","tool_name":"execute","args":{"command":"true"}}]', now() - interval '1 hour')`,
      [chat.id],
    );
    await db().query("UPDATE chats SET status = 'running' WHERE id = $1", [chat.id]);
    await db().query("SELECT pg_notify('tether_chats', $1)", [
      JSON.stringify({ chat_id: chat.id, status: "running" }),
    ]);
    const { history } = await settle(db(), chat.id);
    expect(results(history)[0]).toMatchObject({
      status: "unknown",
      reason: "agent_started_after_tool_call",
    });
  });

  it("US5: a silent agent (accepts, never answers) gives unknown within the answer timeout", async () => {
    const http = await import("node:http");
    const silent = http.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanup.push(() => {
      silent.closeAllConnections();
      return new Promise((r) => silent.close(() => r()));
    });
    const { fake, setup } = await env(db, { agentAnswerTimeoutMs: 400 });
    const port = (silent.address() as { port: number }).port;
    await db().query("UPDATE workspaces SET agent_url = $2 WHERE id = $1", [
      setup.workspaceId,
      `http://127.0.0.1:${port}`,
    ]);
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] },
      { text: "ok" },
    );
    const started = Date.now();
    const chatId = await startChat(db(), setup, "go");
    const { history } = await settle(db(), chatId);
    expect(results(history)[0]).toMatchObject({ status: "unknown", reason: "agent_no_answer" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("US1/US4: an ownership change mid-execute neither starts a second process nor commits twice", async () => {
    const {
      fake,
      setup,
      agent,
      worker: first,
    } = await env(db, { leaseMs: 600, heartbeatMs: 60_000 });
    const file = path.join(agent.dir, "log.txt");
    fake.script(
      {
        toolCalls: [
          {
            id: "x",
            name: "execute",
            args: { command: `echo line >> ${file}; sleep 1.5; echo ok`, timeout: "10s" },
          },
        ],
      },
      { text: "done" },
    );
    const chatId = await startChat(db(), setup, "go");
    // The first worker starts the command, then stalls: it never renews its lease.
    const end = Date.now() + 10_000;
    while ((await readFile(file, "utf8").catch(() => "")) === "" && Date.now() < end)
      await new Promise((r) => setTimeout(r, 20));
    const second = testWorker(db(), { leaseMs: 600, heartbeatMs: 150 });
    await second.start();
    cleanup.push(() => second.stop());
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(await readFile(file, "utf8")).toBe("line\n");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", output: "ok\n" }),
    ]);
    expect(first.ownedChats).not.toContain(chatId);
  });
});
