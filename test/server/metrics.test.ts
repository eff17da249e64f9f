// GET /metrics and the log of a real `bin/tether server`: after a chat ran a tool call and
// another was interrupted, the scrape (no token) shows what happened, the log lines about the
// tool call carry chat_id, the contract's tool call UUID and replica, and no secret is logged.

import { randomInt } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseChatId, toMessageId, toolCallUuid } from "../../src/contract/index.ts";
import { startFakeProvider } from "../support/fake-provider.ts";
import {
  api,
  parseExposition,
  seedEmbeddedDatabase,
  startServerProcess,
} from "../support/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-metrics-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

interface Message {
  id: string;
  role: string;
  parts: { type: string; tool_call_id?: string; result?: { status: string } }[];
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("GET /metrics and the server log", () => {
  it("a scrape after a tool call and an interrupt shows them; the tool call's log lines name it; no secret is logged", async () => {
    const fake = await startFakeProvider();
    cleanups.push(() => fake.close());
    const home = await tempDir();
    const ws = await tempDir();
    await seedEmbeddedDatabase(path.join(home, "data"));
    const server = await startServerProcess(
      ["--data-dir", path.join(home, "data"), "--workspace-dir", ws],
      home,
      (fn) => cleanups.push(fn),
    );
    // The local agent is the default workspace; it requires a token the server holds (sealed in
    // local-agent.json, passed to the agent in its environment).
    const { pid } = JSON.parse(
      await readFile(path.join(home, "data", "local-agent.json"), "utf8"),
    ) as { pid: number };
    const agentEnv = (await readFile(`/proc/${pid}/environ`, "utf8")).split("\0");
    const localAgent = {
      pid,
      token: agentEnv.find((kv) => kv.startsWith("TETHER_AGENT_TOKEN="))?.slice(19) ?? "",
    };
    // Runs last, after the server is gone (else its supervisor would start another agent).
    cleanups.unshift(() => {
      try {
        process.kill(-localAgent.pid, "SIGKILL");
      } catch {
        // gone
      }
    });
    expect(localAgent.token.length).toBeGreaterThan(8);

    const { token } = await api<{ token: string }>(
      server.url,
      undefined,
      "POST",
      "/api/v1/users/first",
      {
        email: "a@b.c",
        password: "correct horse battery",
      },
    );
    const apiKey = `sk-model-secret-${randomInt(1e9)}`;
    await api(server.url, token, "POST", "/api/v1/models", {
      provider: "openai-compatible",
      model: "fake-model",
      base_url: fake.url,
      api_key: apiKey,
      is_default: true,
    });

    // Chat 1: one execute that completes, then an answer.
    fake.script(
      { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }] },
      { text: "Done." },
    );
    const chat = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "run it",
    });
    await until("chat 1 to finish", async () => {
      const c = await api<{ status: string }>(server.url, token, "GET", `/api/v1/chats/${chat.id}`);
      return c.status === "waiting" ? c : undefined;
    });
    const { messages } = await api<{ messages: Message[] }>(
      server.url,
      token,
      "GET",
      `/api/v1/chats/${chat.id}/messages`,
    );
    const holder = messages.find((m) => m.parts.some((p) => p.tool_call_id === "call_1"))!;
    const uuid = toolCallUuid(parseChatId(chat.id)!, toMessageId(holder.id)!, "call_1");

    // Chat 2: a long command, interrupted while it runs.
    const marker = `30.${randomInt(100_000, 999_999)}`;
    fake.script({
      toolCalls: [{ id: "call_2", name: "execute", args: { command: `sleep ${marker}` } }],
    });
    const chat2 = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "wait",
    });
    await until("the sleep to start", async () =>
      server.logLines().some((l) => l.msg === "tool call sent" && l.chat_id === chat2.id)
        ? true
        : undefined,
    );
    await api(server.url, token, "POST", `/api/v1/chats/${chat2.id}/interrupt`);
    await until("chat 2 to finish", async () => {
      const c = await api<{ status: string }>(
        server.url,
        token,
        "GET",
        `/api/v1/chats/${chat2.id}`,
      );
      return c.status === "waiting" ? c : undefined;
    });

    // The scrape needs no token; the runners let go of both chats soon after they finish.
    const scrape = await until("the runners to let go", async () => {
      const res = await fetch(new URL("/metrics", server.url));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
      const s = parseExposition(await res.text());
      return s.get("tether_chats_owned") === 0 ? s : undefined;
    });
    expect(scrape.get('tether_chats{status="waiting"}')).toBe(2);
    expect(scrape.get('tether_chats{status="running"}')).toBe(0);
    expect(scrape.get('tether_chats{status="interrupting"}')).toBe(0);
    expect(scrape.get('tether_chats{status="error"}')).toBe(0);
    expect(scrape.get("tether_lease_takeovers_total")).toBe(0);
    expect(scrape.get('tether_tool_calls_total{tool="execute",status="completed"}')).toBe(1);
    expect(scrape.get('tether_tool_calls_total{tool="execute",status="canceled"}')).toBe(1);
    const start = 'route="POST /api/v0/processes/start"';
    expect(scrape.get(`tether_agent_request_duration_seconds_count{${start}}`)).toBe(2);
    expect(scrape.get(`tether_agent_request_duration_seconds_bucket{${start},le="+Inf"}`)).toBe(2);
    const cancel = 'route="POST /api/v0/tool-calls/{id}/cancel"';
    expect(scrape.get(`tether_agent_request_duration_seconds_count{${cancel}}`)).toBe(1);
    expect(scrape.get("tether_model_stream_duration_seconds_count")).toBe(3);
    expect(scrape.get("tether_model_stream_duration_seconds_sum")).toBeGreaterThan(0);
    expect(scrape.get("tether_interrupt_duration_seconds_count")).toBe(1);

    // The log is written asynchronously: wait for the interrupt's line rather than race it.
    const interrupted = await until("the interrupt's log line", async () =>
      server.logLines().find((l) => l.msg === "interrupt committed"),
    );
    const lines = server.logLines();
    const about = lines.filter((l) => l.tool_call_uuid === uuid);
    expect(about.map((l) => l.msg)).toEqual(["tool call sent", "tool call result committed"]);
    const replica = about[0]!.replica;
    expect(replica).toEqual(expect.any(String));
    for (const l of about) expect(l).toMatchObject({ chat_id: chat.id, replica });
    expect(interrupted).toMatchObject({
      chat_id: chat2.id,
      replica,
    });
    const log = server.stderr();
    expect(log).not.toContain(apiKey);
    expect(log).not.toContain(localAgent.token);
    expect(fake.requests.length).toBe(3);
    expect(JSON.stringify(fake.requests)).toContain("run it"); // the model configured with the key answered

    const exited = new Promise((r) => server.proc.once("exit", r));
    server.proc.kill("SIGTERM"); // a graceful stop also stops the local agent
    await exited;
  }, 90_000);
});
