// The agent serves only its server (issue 11): JSON routes take only application/json, a
// browser's request (it carries an Origin) is refused, an agent off loopback needs a token,
// lists are per chat, and bad input (raw bytes in a tool call ID, repeated query parameters,
// NUL bytes, an unreadable file) gets a coded 4xx with nothing run or recorded.

import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AGENT_ERRORS } from "../../src/agent/answer.ts";
import { escapeToolCallId } from "../../src/contract/index.ts";
import { oversizedHeadOutcomes, rawRequest } from "../support/http.ts";
import { newChat, tcHeaders, tcToolCall } from "../support/toolcall.ts";
import { until, useAgents } from "../support/agent.ts";

const BIN = path.resolve(import.meta.dirname, "../../bin/tether");
const startAgent = useAgents();
const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** Runs `tether agent ARGS` until it prints its listening line (then kills it) or exits. */
function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stderr: string; url?: string; unauthorized?: number }> {
  const proc = spawn(BIN, ["agent", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, TETHER_AGENT_TOKEN: "", ...env },
  });
  return new Promise((resolve) => {
    let out = "";
    let err = "";
    let url: string | undefined;
    let unauthorized: number | undefined;
    proc.stderr.on("data", (c: Buffer) => (err += c.toString()));
    proc.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m && !url) {
        url = m[1]!;
        void rawRequest(url, { path: "/api/v0/info" }).then((r) => {
          unauthorized = r.status;
          proc.kill("SIGTERM");
        });
      }
    });
    proc.once("exit", (code) => resolve({ code, stderr: err, url, unauthorized }));
  });
}

const START = "/api/v0/processes/start";

describe("the agent serves only its server", () => {
  it("a request head over 16 KiB gets a coded 431 the client reads, though it is still writing", async () => {
    // Node's own handler destroyed the socket with the request unread: the kernel reset the
    // connection and a client still writing got ECONNRESET instead of the answer.
    const agent = await startAgent();
    const outcomes = await oversizedHeadOutcomes(agent.url, { clients: 10, bytes: 8 << 20 });
    expect(outcomes).toEqual(Array(10).fill("431 request_head_too_large"));
    expect(AGENT_ERRORS.request_head_too_large).toBe(431);
    // The agent still answers.
    expect((await rawRequest(agent.url, { path: "/api/v0/info" })).status).not.toBe(431);
  });

  it("JSON routes refuse any Content-Type but application/json with a coded 415; nothing starts", async () => {
    const agent = await startAgent();
    const chatId = newChat();
    const marker = path.join(agent.dir, "ran");
    const body = JSON.stringify({ command: `touch ${marker}` });
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/jsonx",
      "",
    ]) {
      const res = await rawRequest(agent.url, {
        path: START,
        headers: { "content-type": type, ...tcHeaders({ chatId, message: 1, id: "a" }) },
        body,
      });
      expect(res.status).toBe(415);
      expect(res.json()).toMatchObject({ code: "unsupported_media_type" });
    }
    for (const route of [
      "/api/v0/edit-files",
      "/api/v0/list-directory",
      "/api/v0/processes/x/signal",
    ]) {
      const res = await rawRequest(agent.url, {
        path: route,
        headers: { "content-type": "text/plain" },
        body: "{}",
      });
      expect(res.status).toBe(415);
    }
    // A repeated Content-Type is ambiguous (Node keeps the first): refused too.
    const twice = await rawRequest(agent.url, {
      path: START,
      headers: {
        "content-type": ["application/json", "text/plain"],
        ...tcHeaders({ chatId, message: 1, id: "a" }),
      },
      body,
    });
    expect(twice.status).toBe(415);
    await new Promise((r) => setTimeout(r, 100));
    expect((await agent.client.listProcesses({ chatId })).processes).toEqual([]);
    expect((await agent.client.listProcesses()).processes).toEqual([]);
    // Parameters and case are fine, and the same call then runs: the 415 recorded nothing.
    const ok = await rawRequest(agent.url, {
      path: START,
      headers: {
        "content-type": "Application/JSON; charset=utf-8",
        ...tcHeaders({ chatId, message: 1, id: "a" }),
      },
      body,
    });
    expect(ok.status).toBe(200);
    expect(AGENT_ERRORS.unsupported_media_type).toBe(415);
  });

  it("a request with an Origin header is refused with a coded 403 before anything runs", async () => {
    const agent = await startAgent();
    const marker = path.join(agent.dir, "ran");
    for (const origin of ["https://evil.example", "null", ""]) {
      const res = await rawRequest(agent.url, {
        path: START,
        headers: { origin, "content-type": "application/json" },
        body: { command: `touch ${marker}` },
      });
      expect(res.status).toBe(403);
      expect(res.json()).toMatchObject({ code: "origin_refused" });
    }
    const info = await rawRequest(agent.url, {
      path: "/api/v0/info",
      headers: { origin: "http://127.0.0.1:3000" },
    });
    expect(info.status).toBe(403);
    expect((await agent.client.listProcesses()).processes).toEqual([]);
    expect((await rawRequest(agent.url, { path: "/api/v0/info" })).status).toBe(200);
  });

  it("a list without Coder-Chat-Id shows only processes started without one; info counts all", async () => {
    const agent = await startAgent();
    const chat = await agent.client.startProcess(
      { command: "sleep 30" },
      { toolCall: tcToolCall({ chatId: newChat(), message: 1, id: "a" }) },
    );
    const bare = await agent.client.startProcess({ command: "sleep 30" });
    const listed = (await agent.client.listProcesses()).processes.map((p) => p.id);
    expect(listed).toEqual([bare.id]);
    expect(listed).not.toContain(chat.id);
    expect((await agent.client.info()).processes_running).toBe(2);
  });

  it("a raw non-ASCII Coder-Tool-Call-Id is the same call as its %-escaped form: it runs once", async () => {
    const agent = await startAgent();
    const chatId = newChat();
    const id = "工具-é";
    const escaped = tcHeaders({ chatId, message: 1, id });
    expect(escaped["Coder-Tool-Call-Id"]).toBe(escapeToolCallId(id));
    // Node sends a header string's chars as Latin-1 bytes: this sends the raw UTF-8 bytes.
    const raw = { ...escaped, "Coder-Tool-Call-Id": Buffer.from(id, "utf8").toString("latin1") };
    const body = { command: "echo ran >> log" };
    const first = await rawRequest(agent.url, { path: START, headers: raw, body });
    const second = await rawRequest(agent.url, { path: START, headers: escaped, body });
    const third = await rawRequest(agent.url, { path: START, headers: raw, body });
    expect([first.status, second.status, third.status]).toEqual([200, 200, 200]);
    expect(second.json()).toEqual(first.json());
    expect(third.json()).toEqual(first.json());
    const { id: pid } = first.json<{ id: string }>();
    await until(async () => (await agent.client.processOutput(pid, { chatId })).running === false);
    expect((await agent.client.listProcesses({ chatId })).processes).toHaveLength(1);
    const log = await agent.client.readFile(path.join(agent.dir, "log"));
    expect(log.toString()).toBe("ran\n");
  });

  it("a repeated query parameter on read-file, read-file-lines and write-file is a coded 400", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "a.txt");
    await writeFile(file, "hello\n");
    const q = `path=${encodeURIComponent(file)}&path=${encodeURIComponent(file)}`;
    for (const route of ["read-file", "read-file-lines"]) {
      const res = await rawRequest(agent.url, { path: `/api/v0/${route}?${q}` });
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({ code: "repeated_query_parameter" });
    }
    const offsets = await rawRequest(agent.url, {
      path: `/api/v0/read-file?path=${encodeURIComponent(file)}&offset=1&offset=2`,
    });
    expect(offsets.status).toBe(400);
    const tc = { chatId: newChat(), message: 1, id: "w" };
    const write = await rawRequest(agent.url, {
      path: `/api/v0/write-file?${q}`,
      headers: { ...tcHeaders(tc), "content-type": "application/octet-stream" },
      body: Buffer.from("bye\n"),
    });
    expect(write.status).toBe(400);
    expect(write.json()).toMatchObject({ code: "repeated_query_parameter" });
    expect((await agent.client.readFile(file)).toString()).toBe("hello\n");
    // Nothing recorded: the corrected write of the same call runs.
    await agent.client.writeFile(file, "bye\n", { toolCall: tcToolCall(tc) });
    expect((await agent.client.readFile(file)).toString()).toBe("bye\n");
  });

  it("a NUL in a start's command, env or workdir is a coded 400; nothing starts or is recorded", async () => {
    const agent = await startAgent();
    const chatId = newChat();
    const tc = { chatId, message: 1, id: "n" };
    const bodies = [
      { command: "echo a\u0000b" },
      { command: "true", env: { A: "x\u0000y" } },
      { command: "true", env: { "A\u0000B": "x" } },
      { command: "true", workdir: "/tmp\u0000x" },
    ];
    for (const body of bodies) {
      const res = await rawRequest(agent.url, { path: START, headers: tcHeaders(tc), body });
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({ code: "nul_in_input" });
    }
    expect((await agent.client.listProcesses({ chatId })).processes).toEqual([]);
    const ok = await agent.client.startProcess({ command: "true" }, { toolCall: tcToolCall(tc) });
    expect(ok.started).toBe(true);
  });

  it("a read that fails with EIO (/proc/self/mem) is a coded 400, not a 500", async () => {
    const agent = await startAgent();
    const res = await rawRequest(agent.url, { path: "/api/v0/read-file?path=/proc/self/mem" });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code: "file_unreadable" });
    const lines = await rawRequest(agent.url, {
      path: "/api/v0/read-file-lines?path=/proc/self/mem",
    });
    expect(lines.status).toBe(200);
    expect(lines.json()).toMatchObject({ success: false });
  });
});

describe("tether agent --listen off loopback", () => {
  it("refuses to start without a token: one line, exit 2", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-agent-"));
    dirs.push(dir);
    for (const host of ["0.0.0.0:0", ":0", "[::]:0"]) {
      const r = await runCli(["--listen", host, "--dir", dir]);
      expect(r.code).toBe(2);
      expect(r.url).toBeUndefined();
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(/without a token/);
    }
  });

  it("takes the token from TETHER_AGENT_TOKEN or --token-file, and then requires it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-agent-"));
    dirs.push(dir);
    const fromEnv = await runCli(["--listen", "0.0.0.0:0", "--dir", dir], {
      TETHER_AGENT_TOKEN: "s3cret",
    });
    expect(fromEnv.url).toBeDefined();
    expect(fromEnv.unauthorized).toBe(401);
    const file = path.join(dir, "token");
    await writeFile(file, "s3cret\n", { mode: 0o600 });
    const fromFile = await runCli(["--listen", "0.0.0.0:0", "--dir", dir, "--token-file", file]);
    expect(fromFile.url).toBeDefined();
    expect(fromFile.unauthorized).toBe(401);
    // On loopback no token is needed (the local agent's default).
    const loop = await runCli(["--listen", "127.0.0.1:0", "--dir", dir]);
    expect(loop.unauthorized).toBe(200);
  });
});
