// The agent as a program: `bin/tether agent` (API.md), auth, errors, info.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { inject } from "light-my-request";
import { AgentClient } from "../../src/contract/index.ts";
import { rawRequest } from "../support/http.ts";
import { until, useAgents } from "../support/agent.ts";

const BIN = path.resolve(import.meta.dirname, "../../bin/tether");

const startAgent = useAgents();
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function runAgentCli(args: string[]): Promise<{ proc: ChildProcess; url: string }> {
  const proc = spawn(BIN, ["agent", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(proc);
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) resolve({ proc, url: m[1]! });
    });
    let err = "";
    proc.stderr.on("data", (c: Buffer) => (err += c.toString()));
    proc.once("exit", (code) => reject(new Error(`agent exited ${code}: ${err}`)));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("bin/tether agent", () => {
  it("prints the listening line, requires the token, and SIGTERM kills its processes", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-cli-"));
    dirs.push(dir);
    const { proc, url } = await runAgentCli([
      "--listen",
      "127.0.0.1:0",
      "--dir",
      dir,
      "--token",
      "s3cret",
    ]);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const noToken = await rawRequest(url, { path: "/api/v0/info" });
    expect(noToken.status).toBe(401);
    expect(noToken.json()).toHaveProperty("message");
    const wrong = await rawRequest(url, {
      path: "/api/v0/info",
      headers: { authorization: "Bearer nope" },
    });
    expect(wrong.status).toBe(401);
    const client = new AgentClient({ baseUrl: url, token: "s3cret" });
    const info = await client.info();
    expect(info).toMatchObject({ api_version: "0", tool_calls: true });
    const started = await client.startProcess({ command: "echo $$; exec sleep 60" });
    let pid = 0;
    await until(async () => {
      pid = Number((await client.processOutput(started.id)).output.trim());
      return pid > 0;
    });
    expect((await client.processOutput(started.id)).running).toBe(true);
    expect(alive(pid)).toBe(true);
    client.close();
    const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
    proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(alive(pid)).toBe(false);
  });

  it("an agent killed with SIGKILL leaves no process behind: its spawner kills them", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-cli-"));
    dirs.push(dir);
    const { proc, url } = await runAgentCli(["--listen", "127.0.0.1:0", "--dir", dir]);
    const client = new AgentClient({ baseUrl: url });
    const started = await client.startProcess({ command: "echo $$; exec sleep 60" });
    let pid = 0;
    await until(async () => {
      pid = Number((await client.processOutput(started.id)).output.trim());
      return pid > 0;
    });
    client.close();
    proc.kill("SIGKILL");
    await until(() => !alive(pid));
  });

  it("refuses a bad --listen with a clear error", async () => {
    const proc = spawn(BIN, ["agent", "--listen", "nope"], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(proc);
    let err = "";
    proc.stderr.on("data", (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((r) => proc.once("exit", (c) => r(c)));
    expect(code).not.toBe(0);
    expect(err).toMatch(/Invalid listen address "nope"/);
  });
});

describe("agent routes", () => {
  it("info answers version, api version, start time and tool_calls", async () => {
    const agent = await startAgent();
    const info = await agent.client.info();
    expect(info).toEqual({
      version: expect.any(String),
      api_version: "0",
      started_at: expect.any(String),
      tool_calls: true,
      processes_running: 0,
    });
    expect(Number.isNaN(Date.parse(info.started_at))).toBe(false);
  });

  it("requests without headersDistinct (light-my-request's, like HTTP/2's) are parsed the same", async () => {
    const agent = await startAgent();
    const chatId = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    const res = await inject(agent.server.handle, {
      method: "POST",
      url: "/api/v0/processes/start",
      headers: {
        "content-type": "application/json",
        "coder-chat-id": chatId,
        "coder-tool-call-message-id": "1",
        "coder-tool-call-id": "call%2F1",
        "coder-tool-call-age-ms": "0",
      },
      payload: { command: "true" },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["coder-tool-call-run-age-ms"]).toBeDefined();
  });

  it("an unknown route is a JSON 404", async () => {
    const agent = await startAgent();
    const res = await rawRequest(agent.url, { path: "/api/v0/nope" });
    expect(res.status).toBe(404);
    expect(res.json()).toHaveProperty("message");
  });

  it("a repeated Coder-Chat-Id is 400", async () => {
    const agent = await startAgent();
    const id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    const res = await rawRequest(agent.url, {
      path: "/api/v0/processes/list",
      headers: { "Coder-Chat-Id": [id, id] },
    });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ detail: "invalid Coder-Chat-Id header: multiple values" });
  });

  it("the client refuses redirects", async () => {
    const http = await import("node:http");
    const server = http.createServer((_req, res) => {
      res.statusCode = 307;
      res.setHeader("location", "http://127.0.0.1:1/elsewhere");
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    const client = new AgentClient({ baseUrl: `http://127.0.0.1:${port}` });
    try {
      await expect(client.info()).rejects.toMatchObject({
        status: 307,
        message: expect.stringMatching(/redirect/),
      });
    } finally {
      client.close();
      await new Promise((r) => server.close(r));
    }
  });
});
