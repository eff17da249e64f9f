// Dial-out agents against a real server (in-process, embedded database): `bin/tether agent
// --server` processes dial it (most through a TCP front that can cut their connection), and the
// server drives them over HTTP/2 in reverse — the contract's routes, a chat's tool calls, a lost
// answer, a server restart, tokens that are unknown, revoked or shared by two processes.

import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentClient } from "../../src/contract/index.ts";
import { ToolCallError } from "../../src/contract/index.ts";
import { createChat } from "../../src/chatd/transitions/index.ts";
import { startServer, type RunningServer } from "../../src/cli/server.ts";
import { revokeAgentTokens } from "../../src/workspaces/agent-tokens.ts";
import { RESEND_PAUSES_MS } from "../../src/chatd/tools/context.ts";
import { results, settle } from "../support/chatd.ts";
import {
  registerDialoutWorkspace,
  startAgentProcess,
  type AgentProcess,
} from "../support/dialout.ts";
import { waitFor } from "../support/replicas.ts";
import { BIN, alive, api } from "../support/server.ts";
import { hostPort, startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";
import { newChat, tcToolCall, tcUuid } from "../support/toolcall.ts";

/** Pings stay out of the way: the cut test drops the next bytes an agent sends. */
const NO_PINGS = ["--ping-interval-ms", "600000"];

let home: string;
let dir: string;
let dataDir: string;
let port: number;
let server: RunningServer;
let proxy: TcpProxy;
let agent: AgentProcess;
let ws: string;
let userId: string;
let apiToken: string;
const cleanups: (() => Promise<unknown>)[] = [];

const start = (p: number) =>
  startServer({
    listen: `127.0.0.1:${p}`,
    dataDir,
    workspaceDir: home,
    localWorkspace: false,
    model: "demo",
    log: false,
    agentAnswerTimeoutMs: 5_000,
    agentHub: { routePollMs: 50, reconcileMs: 200, session: { pingIntervalMs: 600_000 } },
  });

const client = async (): Promise<AgentClient> => (await server.agents.forWorkspace(ws))!;

/** Resolves once the workspace's agent is connected and past the contract's 2 s age margin. */
const warm = (workspaceId: string) =>
  waitFor("the agent to be connected and past its age margin", async () => {
    const s = await server.agents.agentStatus(workspaceId);
    return s.connected && s.uptimeMs > 2_500;
  });

beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), "tether-dialout-"));
  dir = path.join(home, "workspace");
  dataDir = path.join(home, "data");
  await mkdir(dir);
  server = await start(0);
  port = Number(new URL(server.url).port);
  const reg = await registerDialoutWorkspace(server.db);
  ws = reg.workspaceId;
  proxy = await startTcpProxy([hostPort(server.url)]);
  agent = startAgentProcess({ server: proxy.url, dir, token: reg.token, args: NO_PINGS }, (f) =>
    cleanups.push(f),
  );
  await agent.connected();
  const first = await api<{ user: { id: string }; token: string }>(
    server.url,
    undefined,
    "POST",
    "/api/v1/users/first",
    { email: "dialout@example.com", password: "correct horse battery" },
  );
  userId = first.user.id;
  apiToken = first.token;
  await warm(ws);
}, 120_000);

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  await proxy?.close();
  await server?.close();
  await rm(home, { recursive: true, force: true });
}, 60_000);

describe("a dial-out agent", () => {
  it("serves the contract over its connection: start replays, output waits, cancel, write, edit, read, list, coded 409s; the workspace reads as connected", async () => {
    const c = await client();
    const chatId = newChat();
    const start = { chatId, message: 1, id: "call/1" };
    const req = { command: "echo run >> runs.txt; echo out" };
    const first = await c.startProcess(req, { toolCall: tcToolCall(start) });
    expect(first.id).toBe(tcUuid(start));
    const out = await c.processOutput(first.id, { chatId, wait: true });
    expect(out).toMatchObject({ output: "out\n", running: false, exit_code: 0 });
    const again = await c.startProcess(req, { toolCall: tcToolCall({ ...start, ageMs: 50 }) });
    expect(again.id).toBe(first.id);
    expect(await readFile(path.join(dir, "runs.txt"), "utf8")).toBe("run\n");
    const cancel = await c.cancelToolCall(tcToolCall(start), 0);
    expect(cancel).toMatchObject({ started: true, process: { running: false } });

    const file = path.join(dir, "notes.txt");
    await c.writeFile(file, "hello\n", { toolCall: tcToolCall({ chatId, message: 2, id: "w" }) });
    const edit = await c.editFiles(
      {
        files: [{ path: file, edits: [{ old_text: "hello", new_text: "bye" }] }],
        include_diff: true,
      },
      { toolCall: tcToolCall({ chatId, message: 3, id: "e" }) },
    );
    expect(edit.files?.[0]?.diff).toContain("+bye");
    expect((await c.readFile(file)).toString()).toBe("bye\n");
    expect(await c.readFileLines(file)).toMatchObject({ success: true, content: "1\tbye" });
    const listing = await c.listDirectory({ path: [dir], relativity: "root" });
    expect(listing.contents.map((e) => e.name)).toContain("notes.txt");
    expect((await c.listProcesses({ chatId })).processes.map((p) => p.id)).toContain(first.id);
    expect((await c.info()).tool_calls).toBe(true);
    // A call of an older message than the chat's latest: the agent's coded refusal, decoded.
    const stale = await c
      .startProcess(req, { toolCall: tcToolCall({ chatId, message: 1, id: "late" }) })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ToolCallError);
    expect((stale as ToolCallError).code).toBe("stale_tool_call");

    const view = await api<{ agent: { connected: boolean }; health: { uptime_ms: number } }>(
      server.url,
      apiToken,
      "GET",
      `/api/v1/workspaces/${ws}`,
    );
    expect(view.agent).toEqual({ connected: true });
    expect(view.health.uptime_ms).toBeGreaterThan(2_000);
  }, 30_000);

  it("multiplexes: a start answers while a long wait=true on the same connection is pending", async () => {
    const c = await client();
    const chatId = newChat();
    const slow = await c.startProcess(
      { command: "while [ ! -e go ]; do sleep 0.05; done; echo slow" },
      { chatId },
    );
    let waited = false;
    const waiting = c.processOutput(slow.id, { chatId, wait: true }).then((r) => {
      waited = true;
      return r;
    });
    const quick = await c.startProcess({ command: "echo quick" }, { chatId });
    expect((await c.processOutput(quick.id, { chatId, wait: true })).output).toBe("quick\n");
    expect(waited).toBe(false); // the slow process cannot have exited: `go` does not exist yet
    await writeFile(path.join(dir, "go"), "");
    expect((await waiting).output).toBe("slow\n");
  }, 30_000);

  it("runs a chat's execute end to end through the worker", async () => {
    const chat = await createChat(server.db, {
      ownerId: userId,
      workspaceId: ws,
      modelConfigId: null,
      message: "$ echo hello from the dial-out agent",
    });
    const { chat: done, history } = await settle(server.db, chat.id, 20_000);
    expect(done.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({
        status: "completed",
        exit_code: 0,
        output: "hello from the dial-out agent\n",
      }),
    ]);
  }, 30_000);

  it("a start whose answer is lost with the connection waits for the agent to reconnect: one run, the real result", async () => {
    const before = agent.connects();
    const cut = proxy.cutOnNextAgentBytes();
    const chat = await createChat(server.db, {
      ownerId: userId,
      workspaceId: ws,
      modelConfigId: null,
      message: "$ echo run >> cut.txt; echo finished",
    });
    await cut; // the agent's answer to the start was dropped, and its connection cut
    // The agent cannot dial back for longer than every resend's pause: only the transport's wait
    // for the agent (within the answer timeout) bridges the gap.
    proxy.setTargets([]);
    await sleep(RESEND_PAUSES_MS.reduce((a, b) => a + b, 0) + 300);
    proxy.setTargets([hostPort(server.url)]);
    const { history } = await settle(server.db, chat.id, 20_000);
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "finished\n" }),
    ]);
    expect(await readFile(path.join(dir, "cut.txt"), "utf8")).toBe("run\n");
    expect(agent.connects()).toBeGreaterThan(before);
  }, 30_000);

  it("an agent whose connection drops is not connected at once, not a ping timeout later", async () => {
    proxy.setTargets([]); // it cannot dial back meanwhile
    const before = agent.connects();
    proxy.cutAll();
    await waitFor("the registry to forget the agent", async () => {
      return !(await server.agents.agentStatus(ws)).connected;
    });
    proxy.setTargets([hostPort(server.url)]);
    await agent.connected(before + 1);
  }, 30_000);

  it("after the server restarts, the agent reconnects with its processes and records: a repeated start replays", async () => {
    const c = await client();
    const chatId = newChat();
    const tc = { chatId, message: 1, id: "restart" };
    const req = {
      command:
        "echo run >> restart.txt; while [ ! -e restart-go ]; do sleep 0.05; done; echo after",
    };
    const first = await c.startProcess(req, { toolCall: tcToolCall(tc) });
    const before = agent.connects();
    await server.close();
    server = await start(port);
    await agent.connected(before + 1);

    const c2 = await client();
    const again = await c2.startProcess(req, { toolCall: tcToolCall({ ...tc, ageMs: 10_000 }) });
    expect(again.id).toBe(first.id);
    expect(again.runAgeMs).toBeGreaterThan(0);
    const listed = (await c2.listProcesses({ chatId })).processes;
    expect(listed).toEqual([expect.objectContaining({ id: first.id, running: true })]);
    await writeFile(path.join(dir, "restart-go"), "");
    expect((await c2.processOutput(first.id, { chatId, wait: true })).output).toBe("after\n");
    expect(await readFile(path.join(dir, "restart.txt"), "utf8")).toBe("run\n");
  }, 60_000);
});

describe("agent tokens", () => {
  it("an unknown token is refused, the agent keeps retrying and never logs the token", async () => {
    const a = startAgentProcess({ server: server.url, dir, token: "not-a-real-token" }, (f) =>
      cleanups.push(f),
    );
    await waitFor("two refusals", () => a.log().split("refused the agent token").length > 2);
    expect(a.connects()).toBe(0);
    expect(a.log()).not.toContain("not-a-real-token");
    await a.stop();
  }, 30_000);

  it("revoking the tokens closes the live connection, and the agent is refused from then on", async () => {
    const w = await registerDialoutWorkspace(server.db, "revoked");
    const a = startAgentProcess({ server: server.url, dir, token: w.token }, (f) =>
      cleanups.push(f),
    );
    await a.connected();
    expect((await server.agents.agentStatus(w.workspaceId)).connected).toBe(true);
    await revokeAgentTokens(server.db, w.workspaceId);
    await waitFor("the agent to be disconnected", () => a.log().includes("disconnected"));
    await waitFor("two refusals", () => a.log().split("refused the agent token").length > 2);
    expect((await server.agents.agentStatus(w.workspaceId)).connected).toBe(false);
    expect(a.connects()).toBe(1);
    expect(a.log()).not.toContain(w.token);
    await a.stop();
  }, 30_000);

  it("of two agent processes with one token, the newer holds the connection and the older is refused until it goes", async () => {
    const w = await registerDialoutWorkspace(server.db, "twice");
    const older = startAgentProcess({ server: server.url, dir, token: w.token }, (f) =>
      cleanups.push(f),
    );
    await older.connected();
    // Apart by more than the tolerance in which two agents count as the same age.
    await waitFor("the older agent to be up 1.5 s", async () => {
      const s = await server.agents.agentStatus(w.workspaceId);
      return s.connected && s.uptimeMs > 1_500;
    });
    const newer = startAgentProcess({ server: server.url, dir, token: w.token }, (f) =>
      cleanups.push(f),
    );
    await newer.connected();
    await waitFor("the older agent to be refused as superseded", () =>
      older.log().includes("agent_superseded"),
    );
    expect(older.connects()).toBe(1);
    expect(newer.connects()).toBe(1);
    await newer.stop();
    await older.connected(2);
    await older.stop();
  }, 60_000);
});

describe("bin/tether agent --server", () => {
  it("without TETHER_AGENT_TOKEN it says so in one line and exits 2; with both --listen and --server it refuses", async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; err: string }>((resolve) => {
        const env = { ...process.env };
        delete env.TETHER_AGENT_TOKEN;
        const p = spawn(BIN, ["agent", ...args], { env, stdio: ["ignore", "ignore", "pipe"] });
        let err = "";
        p.stderr.on("data", (c: Buffer) => (err += c.toString()));
        p.once("exit", (code) => resolve({ code, err }));
      });
    const noToken = await run(["--server", server.url]);
    expect(noToken.code).toBe(2);
    expect(noToken.err.trim().split("\n")).toEqual([
      "tether agent --server needs the workspace's agent token in TETHER_AGENT_TOKEN.",
    ]);
    const both = await run(["--server", server.url, "--listen", "127.0.0.1:0"]);
    expect(both.code).not.toBe(0);
    expect(both.err).toContain("exactly one of --listen");
  }, 30_000);

  it("SIGTERM kills the processes it started and exits", async () => {
    const w = await registerDialoutWorkspace(server.db, "sigterm");
    const a = startAgentProcess({ server: server.url, dir, token: w.token }, (f) =>
      cleanups.push(f),
    );
    await a.connected();
    const c = (await server.agents.forWorkspace(w.workspaceId))!;
    const chatId = newChat();
    const p = await c.startProcess({ command: "echo $$; sleep 60" }, { chatId });
    const pid = Number(
      await waitFor("the pid", async () => {
        const o = await c.processOutput(p.id, { chatId });
        return /^\d+\n/.test(o.output) ? o.output.trim() : undefined;
      }),
    );
    expect(alive(pid)).toBe(true);
    expect(await a.stop("SIGTERM")).toBe(0);
    await waitFor("the process to die", () => !alive(pid));
    await waitFor("the registry to forget it", async () => {
      return !(await server.agents.agentStatus(w.workspaceId)).connected;
    });
  }, 30_000);
});
