// Bounded retries (issue 11, issue 14): a task that fails the same way on every attempt shows
// `retrying` while it retries and then ends — a turn in `error` with `last_error`, an
// interruption in `waiting` with honest results — after a bounded time; a provider's
// Retry-After is waited out; a workspace that refuses the server ends the turn at once; the
// retry log lines carry no conversation. Real worker, real agent, the fake provider, the API.

import { ephemeralSecretBox } from "../../src/chatd/secrets/index.ts";
import { randomInt } from "node:crypto";
import net, { type AddressInfo } from "node:net";
import { Writable } from "node:stream";
import pino from "pino";
import { expect, it } from "vitest";
import { AgentPool } from "../../src/chatd/agents.ts";
import type { Chat } from "../../src/chatd/chats.ts";
import { interrupt, loadChat, retryingOf, sendMessage } from "../../src/chatd/transitions/index.ts";
import { ManualClock } from "../../src/contract/index.ts";
import { openSse, startTestApi } from "../../src/api/test-support.ts";
import { startTestAgent, until, type TestAgent } from "../support/agent.ts";
import { results, settle, startChat, testWorker, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env, cleanup } = useLoops();

/** A logger whose lines the test reads. */
function capturedLog() {
  const lines: string[] = [];
  const log = pino(
    { level: "debug" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    }),
  );
  return { log, lines };
}

async function runningWith(agent: TestAgent, text: string): Promise<boolean> {
  const processes = agent.allProcesses();
  return processes.some((p) => p.command.includes(text) && p.running);
}

/** A loopback port nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describeDatabases("bounded retries", (db) => {
  it("a model whose base URL does not answer: retrying counts the attempts, then the turn ends in error", async () => {
    const api = await startTestApi(db());
    cleanup.push(() => api.app.close());
    await api.app.listen({ host: "127.0.0.1", port: 0 });
    const baseUrl = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
    const modelUrl = `http://127.0.0.1:${await closedPort()}/v1`;
    await api.request("POST", "/api/v1/models", {
      token: api.adminToken,
      body: {
        provider: "openai-compatible",
        model: "m",
        base_url: modelUrl,
        api_key: "sk-test-key",
        is_default: true,
      },
    });
    const { log, lines } = capturedLog();
    // In one process with the API, as a server's: its streams hear the worker's writes.
    const worker = testWorker(db(), {
      buffer: api.buffer,
      feed: api.feed,
      log,
      retryLimitMs: 1_500,
      backoffMinMs: 50,
      backoffMaxMs: 150,
    });
    await worker.start();
    cleanup.push(() => worker.stop());

    const created = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: "PROMPT-CONTENT-7d1f: list the files" },
    });
    expect(created.status).toBe(201);
    expect(created.body.retrying).toBeNull();
    const id = created.body.id as string;
    const sse = await openSse(baseUrl, `/api/v1/chats/${id}/stream`, api.memberToken);
    cleanup.push(async () => sse.close());

    const attempts: number[] = [];
    let final: Record<string, unknown> | undefined;
    const end = Date.now() + 15_000;
    while (Date.now() < end) {
      const got = await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken });
      const retrying = got.body.retrying as Record<string, unknown> | null;
      if (retrying) {
        expect(retrying).toEqual({
          attempt: expect.any(Number),
          last_error: `Cannot connect to the model: connection refused (${modelUrl}).`,
          next_attempt_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        });
        if (attempts.at(-1) !== retrying.attempt) attempts.push(retrying.attempt as number);
      }
      if (got.body.status === "error") {
        final = got.body;
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(final).toBeDefined();
    expect(final!.retrying).toBeNull();
    expect(final!.last_error).toEqual({
      message: `Cannot connect to the model: connection refused (${modelUrl}).`,
      detail: expect.stringMatching(/^Gave up after \d+ failed attempts in a row\.$/),
    });
    // The count grows while it retries.
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect([...attempts].sort((a, b) => a - b)).toEqual(attempts);

    // The stream's status events carry `retrying` live, then the error.
    const events = await sse.until((es) =>
      es.some((e) => e.event === "status" && (e.data as { status: string }).status === "error"),
    );
    const statuses = events.filter((e) => e.event === "status").map((e) => e.data);
    expect(statuses[0]).toMatchObject({ status: "running" });
    expect(statuses).toContainEqual({
      status: "running",
      retrying: expect.objectContaining({ attempt: 1 }),
    });
    expect(statuses.at(-1)).toEqual({ status: "error", retrying: null });

    // The retry lines say what failed, never what the conversation said nor the key.
    const retried = lines.filter((l) => l.includes("task attempt failed; retrying"));
    expect(retried.length).toBeGreaterThanOrEqual(2);
    expect(JSON.parse(retried[0]!)).toMatchObject({
      error: { type: "AI_APICallError", code: "ECONNREFUSED" },
    });
    for (const l of lines) {
      expect(l).not.toContain("PROMPT-CONTENT-7d1f");
      expect(l).not.toContain("sk-test-key");
    }
  });

  it("a provider's 429 with Retry-After is waited out, and retrying.next_attempt_at shows it", async () => {
    const clock = new ManualClock();
    const { fake, setup } = await env(db, { clock });
    fake.script(
      { error: { status: 429, message: "Slow down.", headers: { "retry-after": "2" } } },
      { text: "after the wait" },
    );
    const chatId = await startChat(db(), setup, "go");
    let chat: Chat | undefined;
    await until(async () => {
      chat = await loadChat(db(), chatId);
      return retryingOf(chat!) !== null;
    }, 10_000);
    const retrying = retryingOf(chat!)!;
    expect(retrying.attempt).toBe(1);
    expect(retrying.last_error).toBe(
      `The model provider is rate limiting requests (HTTP 429, ${fake.url}).`,
    );
    // Recorded in the same transaction as updated_at: exactly the provider's 2 s ahead.
    expect(Date.parse(retrying.next_attempt_at) - chat!.updatedAt.getTime()).toBe(2_000);
    // The runner's wait starts once that write has answered it, a moment after it is seen.
    await until(() => clock.hasTimerAt(clock.now() + 2_000), 10_000);
    clock.advance(1_999);
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.requests).toHaveLength(1);
    clock.advance(1);
    const done = await settle(db(), chatId);
    expect(done.chat.status).toBe("waiting");
    expect(retryingOf(done.chat)).toBeNull();
    expect(done.history.at(-1)!.content).toEqual([{ type: "text", text: "after the wait" }]);
    expect(fake.requests).toHaveLength(2);
  });

  it("an interrupt whose task fails on every attempt ends waiting with unknown results and the error", async () => {
    let failing = false;
    let pool: AgentPool | undefined;
    const { agent, fake, setup } = await env(db, {
      retryLimitMs: 600,
      resolveAgent: async (chat: Chat) => {
        if (failing) throw new Error("The agent lookup failed.");
        pool ??= new AgentPool(db(), { secrets: ephemeralSecretBox() });
        return pool.forWorkspace(chat.workspaceId!);
      },
    });
    cleanup.push(async () => pool?.close());
    const d = `30.${randomInt(100_000, 999_999)}`;
    fake.script({
      toolCalls: [{ id: "x", name: "execute", args: { command: `sleep ${d}`, timeout: "60s" } }],
    });
    const chatId = await startChat(db(), setup, "go");
    await until(() => runningWith(agent, `sleep ${d}`), 10_000);
    failing = true;
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "interrupted" }),
    ]);
    expect(chat.lastError).toEqual({
      message: "The agent lookup failed.",
      detail: expect.stringMatching(/^Gave up after \d+ failed attempts in a row\.$/),
    });
  });

  it("a batch whose task fails on every attempt ends the turn in error after the bound", async () => {
    const { fake, setup } = await env(db, {
      retryLimitMs: 600,
      resolveAgent: () => Promise.reject(new Error("The agent lookup failed.")),
    });
    fake.script({ toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] });
    const chatId = await startChat(db(), setup, "go");
    const { chat } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("error");
    expect(chat.lastError).toMatchObject({ message: "The agent lookup failed." });
    expect(retryingOf(chat)).toBeNull();
  });

  it("an agent that refuses the server's token (401) ends the turn in error at once; the next message answers the call unknown", async () => {
    const { fake, setup } = await env(db);
    const guarded = await startTestAgent({ token: "right-token" });
    cleanup.push(() => guarded.close());
    await db().query(
      "UPDATE workspaces SET agent_url = $2, agent_token = 'wrong-token' WHERE id = $1",
      [setup.workspaceId, guarded.url],
    );
    fake.script({ toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] });
    const chatId = await startChat(db(), setup, "go");
    const { chat } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("error");
    expect(chat.lastError!.message).toContain("refused the server's token (HTTP 401)");
    expect(fake.requests).toHaveLength(1);
    await sendMessage(db(), chatId, setup.userId, "and now?", "queue");
    const next = await settle(db(), chatId, 10_000);
    expect(next.chat.status).toBe("waiting");
    expect(results(next.history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "turn_ended" }),
    ]);
  });

  it("a workspace whose agent URL the client cannot speak to ends the turn in error at once", async () => {
    const { fake, setup } = await env(db);
    await db().query("UPDATE workspaces SET agent_url = 'ftp://127.0.0.1:21' WHERE id = $1", [
      setup.workspaceId,
    ]);
    fake.script({ toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] });
    const chatId = await startChat(db(), setup, "go");
    const { chat } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("error");
    expect(chat.lastError!.message).toContain("is not an http:// or https:// URL");
  });
});
