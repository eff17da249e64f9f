import http from "node:http";
import type net from "node:net";
import pino from "pino";
import { afterEach, beforeEach, expect, it } from "vitest";
import { until, useAgents, type TestAgent } from "../../test/support/agent.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { AgentPool } from "../chatd/agents.ts";
import { ephemeralSecretBox } from "../chatd/secrets/index.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { runTool } from "../chatd/tools/index.ts";
import { toolContext } from "../chatd/tools/testing.ts";
import {
  parseChatId,
  toMessageId,
  toolCallUuid,
  type AgentRequestRecord,
} from "../contract/index.ts";
import { createApi } from "./app.ts";
import type { ApiOptions } from "./context.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

const AGENT_TOKEN = "agent-token-f3a9c1-never-answered";
/** Small, so the tests of a silent agent are quick; a real agent answers these in ms. */
const AGENT_TIMEOUT_MS = 400;
/** What the test APIs and pools seal and open agent tokens with (one key, like one server). */
const secrets = ephemeralSecretBox();
const NOT_FOUND_WHY = "not found (exited more than 5 minutes ago and reaped, or another chat's)";

const startAgent = useAgents();

/** Silent agents (accept, never answer), closed after each test. */
const silent: http.Server[] = [];
afterEach(async () => {
  await Promise.all(
    silent.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise((r) => s.close(r));
    }),
  );
});

async function silentAgent(): Promise<string> {
  const server = http.createServer(() => undefined);
  silent.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

async function closedPort(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  await new Promise((r) => server.close(r));
  return url;
}

describeDatabases("chat processes", (db) => {
  let api: TestApi;
  let logLines: string[];
  let otherToken: string;

  beforeEach(async () => {
    logLines = [];
    const log = pino({ level: "trace" }, { write: (l: string) => void logLines.push(l) });
    // Members register agents on loopback here; the address rule is agent-urls.test.ts's.
    api = await startTestApi(db(), {
      log,
      agentTimeoutMs: AGENT_TIMEOUT_MS,
      secrets,
      memberAgentAddresses: () => true,
    });
    const other = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email: "other@example.com", password: "other password", role: "member" },
    });
    expect(other.status).toBe(201);
    const login = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "other@example.com", password: "other password" },
    });
    otherToken = login.body.token as string;
  });
  afterEach(async () => {
    await api.app.close();
  });

  /** Another API on the same database, with its own options, acting as the member. */
  const secondApi = async (o: Partial<ApiOptions>) => {
    const app = await createApi({
      db: db(),
      buffer: new StreamBuffer(),
      secrets,
      memberAgentAddresses: () => true,
      ...o,
    });
    return {
      async request(method: "GET" | "POST", url: string, body?: object) {
        const res = await app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${api.memberToken}` },
          ...(body && { payload: body }),
        });
        return {
          status: res.statusCode,
          body: res.json<Record<string, unknown>>(),
          text: res.body,
        };
      },
      close: () => app.close(),
    };
  };

  const workspace = async (agentUrl: string, agentToken?: string): Promise<string> => {
    const r = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "ws", agent_url: agentUrl, ...(agentToken && { agent_token: agentToken }) },
    });
    expect(r.status).toBe(201);
    // Shared, so every member's chat may run in it.
    const shared = await api.request("PATCH", `/api/v1/workspaces/${r.body.id as string}`, {
      token: api.adminToken,
      body: { shared: true },
    });
    expect(shared.status).toBe(200);
    return r.body.id as string;
  };

  const chat = async (token: string, workspaceId?: string): Promise<string> => {
    const r = await api.request("POST", "/api/v1/chats", {
      token,
      body: workspaceId ? { workspace_id: workspaceId } : {},
    });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };

  /** Starts `command` in the background for the chat, as its execute tool call does. */
  const background = async (
    agent: TestAgent,
    chatId: string,
    toolCallId: string,
    command: string,
  ): Promise<string> => {
    const ctx = toolContext(agent.client, { chatId: parseChatId(chatId)! });
    const out = await runTool(ctx, {
      toolCallId,
      toolName: "execute",
      input: { command, run_in_background: true },
    });
    const uuid = toolCallUuid(ctx.chatId, toMessageId(1)!, toolCallId);
    expect(out.result).toMatchObject({ status: "background", process_id: uuid });
    return uuid;
  };

  const output = (token: string, chatId: string, processId: string) =>
    api.request("GET", `/api/v1/chats/${chatId}/processes/${processId}/output`, { token });

  const signal = (token: string, chatId: string, processId: string, sig: string) =>
    api.request("POST", `/api/v1/chats/${chatId}/processes/${processId}/signal`, {
      token,
      body: { signal: sig },
    });

  /** Polls the process's output through the API until `done` holds. */
  const outputUntil = async (
    chatId: string,
    processId: string,
    done: (body: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>> => {
    let last: Record<string, unknown> = {};
    await until(async () => {
      const r = await output(api.memberToken, chatId, processId);
      expect(r.status).toBe(200);
      last = r.body;
      return done(last);
    });
    return last;
  };

  const signalAudits = async () =>
    (
      await db().query(
        "SELECT user_id, target, details FROM audit_log WHERE action = 'process.signal' ORDER BY id",
      )
    ).rows;

  const noTokenAnywhere = () => {
    expect(api.answers.join("\n")).not.toContain(AGENT_TOKEN);
    expect(logLines.join("\n")).not.toContain(AGENT_TOKEN);
  };

  it("the owner lists a background process, reads its output and stops it with terminate; it then reads not running", async () => {
    const agent = await startAgent({ token: AGENT_TOKEN });
    const chatId = await chat(api.memberToken, await workspace(agent.url, AGENT_TOKEN));
    const id = await background(agent, chatId, "toolu_bg", "echo ready; sleep 30");

    const list = await api.request("GET", `/api/v1/chats/${chatId}/processes`, {
      token: api.memberToken,
    });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      processes: [
        {
          id,
          command: "echo ready; sleep 30",
          workdir: agent.dir,
          background: true,
          running: true,
          started_at_unix: expect.any(Number),
        },
      ],
    });

    const running = await outputUntil(chatId, id, (b) => b.output === "ready\n");
    expect(running).toMatchObject({ output: "ready\n", running: true });
    expect(running).not.toHaveProperty("exit_code");

    const stop = await signal(api.memberToken, chatId, id, "terminate");
    expect(stop.status).toBe(200);
    expect(stop.body).toEqual({ message: `Sent SIGTERM to process ${id}.` });
    // A signal ends a process with exit code −1 (CONTRACT.md 7).
    const ended = await outputUntil(chatId, id, (b) => b.running === false);
    expect(ended).toMatchObject({ output: "ready\n", running: false, exit_code: -1 });
    const after = await api.request("GET", `/api/v1/chats/${chatId}/processes`, {
      token: api.memberToken,
    });
    expect(after.body.processes).toEqual([
      expect.objectContaining({ id, running: false, exit_code: -1 }),
    ]);

    expect(await signalAudits()).toEqual([
      { user_id: api.memberId, target: id, details: { chat_id: chatId, signal: "terminate" } },
    ]);
    const auditLog = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(auditLog.body.entries).toContainEqual(
      expect.objectContaining({ action: "process.signal", user_id: api.memberId, target: id }),
    );
    noTokenAnywhere();
  });

  it("kill stops a process that ignores terminate; signaling it once exited is a 409", async () => {
    const agent = await startAgent();
    const chatId = await chat(api.memberToken, await workspace(agent.url));
    // An ignored signal stays ignored across exec: neither the shell nor its sleeps stop.
    const id = await background(
      agent,
      chatId,
      "toolu_stubborn",
      "trap '' TERM; echo ready; while :; do sleep 0.05; done",
    );
    await outputUntil(chatId, id, (b) => b.output === "ready\n");

    expect((await signal(api.memberToken, chatId, id, "terminate")).status).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
    expect((await output(api.memberToken, chatId, id)).body).toMatchObject({ running: true });

    const kill = await signal(api.memberToken, chatId, id, "kill");
    expect(kill.status).toBe(200);
    expect(kill.body).toEqual({ message: `Sent SIGKILL to process ${id}.` });
    await outputUntil(chatId, id, (b) => b.running === false && b.exit_code === -1);

    const late = await signal(api.memberToken, chatId, id, "kill");
    expect(late.status).toBe(409);
    expect(late.body).toEqual({
      message: `Process ${id} is not running.`,
      code: "process_not_running",
    });
    expect((await signalAudits()).map((a) => (a.details as { signal: string }).signal)).toEqual([
      "terminate",
      "kill",
    ]);
  });

  it("another member finds nothing; an admin reads the chat's processes but may not signal them", async () => {
    const agent = await startAgent({ token: AGENT_TOKEN });
    const chatId = await chat(api.memberToken, await workspace(agent.url, AGENT_TOKEN));
    const id = await background(agent, chatId, "toolu_x", "echo hi; sleep 30");
    const notFound = { message: `Chat ${chatId} not found.` };

    const list = (token: string) =>
      api.request("GET", `/api/v1/chats/${chatId}/processes`, { token });
    expect(await list(otherToken)).toMatchObject({ status: 404, body: notFound });
    expect(await output(otherToken, chatId, id)).toMatchObject({ status: 404, body: notFound });
    for (const sig of ["terminate", "kill"]) {
      expect(await signal(otherToken, chatId, id, sig)).toMatchObject({
        status: 404,
        body: notFound,
      });
    }

    const asAdmin = await list(api.adminToken);
    expect(asAdmin.status).toBe(200);
    expect(asAdmin.body.processes).toEqual([expect.objectContaining({ id, running: true })]);
    await until(async () => (await output(api.adminToken, chatId, id)).body.output === "hi\n");
    expect(await signal(api.adminToken, chatId, id, "kill")).toMatchObject({
      status: 404,
      body: notFound,
    });

    // None of the refused signals reached the process, and none is audited.
    expect((await output(api.memberToken, chatId, id)).body).toMatchObject({ running: true });
    expect(await signalAudits()).toEqual([]);
    noTokenAnywhere();
  });

  it("another chat's process and an unknown one are not found through this chat", async () => {
    const agent = await startAgent();
    const ws = await workspace(agent.url);
    const mine = await chat(api.memberToken, ws);
    const theirs = await chat(api.memberToken, ws);
    const own = await background(agent, mine, "toolu_a", "sleep 30");
    const foreign = await background(agent, theirs, "toolu_b", "sleep 30");

    const list = await api.request("GET", `/api/v1/chats/${mine}/processes`, {
      token: api.memberToken,
    });
    expect((list.body.processes as { id: string }[]).map((p) => p.id)).toEqual([own]);

    const unknown = "0b9c5a0e-4a43-4c1e-9b8e-3f3b2a1c0d9e";
    for (const id of [foreign, unknown]) {
      const read = await output(api.memberToken, mine, id);
      expect(read).toMatchObject({
        status: 404,
        body: { message: `Process ${id} ${NOT_FOUND_WHY}.` },
      });
      expect((await signal(api.memberToken, mine, id, "kill")).status).toBe(404);
    }
    // The foreign process was never signaled, and nothing was audited.
    expect((await output(api.memberToken, theirs, foreign)).body).toMatchObject({ running: true });
    expect(await signalAudits()).toEqual([]);
  });

  it("an unreachable agent is a 502 at once that says the workspace agent is unreachable", async () => {
    const chatId = await chat(api.memberToken, await workspace(await closedPort(), AGENT_TOKEN));
    // A long bound: the answers must come from the refused connection, not from the bound.
    const patient = await secondApi({ agentTimeoutMs: 60_000 });
    try {
      const id = "6d1f3c36-0e43-4e53-8f3c-9a7d3f3e5b21";
      const path = `/api/v1/chats/${chatId}/processes`;
      const began = Date.now();
      const answers = [
        await patient.request("GET", path),
        await patient.request("GET", `${path}/${id}/output`),
        await patient.request("POST", `${path}/${id}/signal`, { signal: "terminate" }),
      ];
      expect(Date.now() - began).toBeLessThan(10_000);
      for (const a of answers) {
        expect(a.status).toBe(502);
        expect(a.body.message).toBe(
          "The workspace agent is unreachable; check that it is running, then try again.",
        );
        expect(a.text).not.toContain(AGENT_TOKEN);
      }
    } finally {
      await patient.close();
    }
    // Nothing was sent, so nothing happened to audit.
    expect(await signalAudits()).toEqual([]);
  });

  it("a silent agent is a 502 after the request bound; a signal sent to it is audited as unknown", async () => {
    const chatId = await chat(api.memberToken, await workspace(await silentAgent(), AGENT_TOKEN));
    const id = "6d1f3c36-0e43-4e53-8f3c-9a7d3f3e5b21";
    const began = Date.now();
    const list = await api.request("GET", `/api/v1/chats/${chatId}/processes`, {
      token: api.memberToken,
    });
    const took = Date.now() - began;
    expect(list.status).toBe(502);
    expect(list.body.message).toBe(
      `The workspace agent is unreachable: it did not answer within ${AGENT_TIMEOUT_MS} ms. Try again.`,
    );
    expect(took).toBeGreaterThanOrEqual(AGENT_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(AGENT_TIMEOUT_MS + 2_000);

    const sent = await signal(api.memberToken, chatId, id, "kill");
    expect(sent.status).toBe(502);
    expect(sent.body.message).toContain("The signal may or may not have taken effect");
    expect(await signalAudits()).toEqual([
      {
        user_id: api.memberId,
        target: id,
        details: { chat_id: chatId, signal: "kill", outcome: "unknown" },
      },
    ]);
    noTokenAnywhere();
  });

  it("an agent that refuses the workspace's token is a 502 that says to check it, and shows neither token", async () => {
    const agent = await startAgent({ token: AGENT_TOKEN });
    const wrong = "wrong-agent-token-7c2e";
    const chatId = await chat(api.memberToken, await workspace(agent.url, wrong));
    const list = await api.request("GET", `/api/v1/chats/${chatId}/processes`, {
      token: api.memberToken,
    });
    expect(list).toMatchObject({
      status: 502,
      body: {
        message:
          "The workspace agent refused the server's request (401): check the workspace's agent token.",
      },
    });
    expect(api.answers.join("\n")).not.toContain(wrong);
    noTokenAnywhere();
  });

  it("a chat without a workspace is a 409 that says so", async () => {
    const chatId = await chat(api.memberToken);
    const id = "6d1f3c36-0e43-4e53-8f3c-9a7d3f3e5b21";
    const message = "This chat has no workspace, so it has no processes.";
    for (const r of [
      await api.request("GET", `/api/v1/chats/${chatId}/processes`, { token: api.memberToken }),
      await output(api.memberToken, chatId, id),
      await signal(api.memberToken, chatId, id, "kill"),
    ]) {
      expect(r).toMatchObject({ status: 409, body: { message } });
    }
  });

  it("a bad process ID or signal is a 400 naming the field", async () => {
    const chatId = await chat(api.memberToken, await workspace(await closedPort()));
    for (const bad of ["a%20b", "-x", "a%2Fb"]) {
      const badId = await output(api.memberToken, chatId, bad);
      expect(badId.status, bad).toBe(400);
      expect(badId.body.detail).toContain("process_id");
    }
    const badSignal = await signal(api.memberToken, chatId, "p1", "SIGSTOP");
    expect(badSignal.status).toBe(400);
    expect(badSignal.body.detail).toContain("signal");
    const none = await api.request("POST", `/api/v1/chats/${chatId}/processes/p1/signal`, {
      token: api.memberToken,
      body: {},
    });
    expect(none.status).toBe(400);
  });

  it("a pool the server gives is used (its observer sees the requests) and outlives the API", async () => {
    const agent = await startAgent({ token: AGENT_TOKEN });
    const seen: AgentRequestRecord[] = [];
    const pool = new AgentPool(db(), {
      secrets,
      onRequest: (r) => seen.push(r),
      memberAgentAddresses: () => true,
    });
    const shared = await secondApi({ agents: pool });
    try {
      const ws = await workspace(agent.url, AGENT_TOKEN);
      const chatId = await chat(api.memberToken, ws);
      const list = await shared.request("GET", `/api/v1/chats/${chatId}/processes`);
      expect(list).toMatchObject({ status: 200, body: { processes: [] } });
      expect(seen).toEqual([
        expect.objectContaining({ route: "GET /api/v0/processes/list", status: 200, chatId }),
      ]);
      await shared.close();
      // Still open for the worker: the same client, and it still answers.
      const client = await pool.forWorkspace(ws);
      expect(await pool.forWorkspace(ws)).toBe(client);
      expect((await client!.listProcesses()).processes).toEqual([]);
    } finally {
      await shared.close();
      pool.close();
    }
  });
});
