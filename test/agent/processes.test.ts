// Processes through the contract, against a real agent (CONTRACT.md 7, Processes; A1, A2, A5).

import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ManualClock, RUN_AGE_HEADER } from "../../src/contract/index.ts";
import { headerValues, rawRequest } from "../support/http.ts";
import { newChat, tcHeaders, tcToolCall, tcUuid } from "../support/toolcall.ts";
import { until, useAgents } from "../support/agent.ts";

const startAgent = useAgents();

describe("processes through the contract", () => {
  it("a start sent 8 times concurrently and again after exit appends exactly one line", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "log.txt");
    const tc = { chatId: newChat(), message: 7, id: "call_append" };
    const req = { command: `echo line >> ${file}` };
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        rawRequest(agent.url, {
          path: "/api/v0/processes/start",
          headers: tcHeaders(tc),
          body: req,
        }),
      ),
    );
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.json()).toEqual({ id: tcUuid(tc), started: true });
      expect(headerValues(a, RUN_AGE_HEADER)).toHaveLength(1);
    }
    await agent.client.processOutput(tcUuid(tc), { wait: true });
    const again = await agent.client.startProcess(req, { toolCall: tcToolCall(tc) });
    expect(again.id).toBe(tcUuid(tc));
    expect(await readFile(file, "utf8")).toBe("line\n");
  });

  it("the process ID is the tool call UUID, and without headers a fresh random one", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 1, id: "toolu_01/%x y" };
    expect(
      (await agent.client.startProcess({ command: "true" }, { toolCall: tcToolCall(tc) })).id,
    ).toBe(tcUuid(tc));
    const a = await agent.client.startProcess({ command: "true" });
    const b = await agent.client.startProcess({ command: "true" });
    expect(a.id).not.toBe(b.id);
    expect(a.runAgeMs).toBe(0);
  });

  it("the work outlives the request that started it", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 1, id: "a" };
    const file = path.join(agent.dir, "late.txt");
    const ac = new AbortController();
    const req = rawRequest(agent.url, {
      path: "/api/v0/processes/start",
      headers: tcHeaders(tc),
      body: { command: `sleep 0.3; echo done > ${file}` },
      signal: ac.signal,
    });
    // The client goes away once the agent has the request (or right after its answer).
    await until(async () => agent.allProcesses().length === 1);
    ac.abort();
    await req.catch(() => undefined);
    expect(agent.allProcesses()[0]).toMatchObject({
      id: tcUuid(tc),
      running: true,
    });
    await until(async () => (await readFile(file, "utf8").catch(() => "")) === "done\n");
  });

  it("env, workdir and CODER_CHAT_ID reach the process", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 1, id: "a" };
    const started = await agent.client.startProcess(
      { command: 'echo "$FOO $CODER_CHAT_ID $(pwd)"', env: { FOO: "bar" }, workdir: "/tmp" },
      { toolCall: tcToolCall(tc) },
    );
    const out = await agent.client.processOutput(started.id, { wait: true, chatId: tc.chatId });
    expect(out).toMatchObject({ running: false, exit_code: 0, output: `bar ${tc.chatId} /tmp\n` });
  });

  it("a missing command is 400 and starts nothing; bad JSON too", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 1, id: "a" };
    for (const body of [{}, { command: "" }, "{nope", { command: 5 }]) {
      const res = await rawRequest(agent.url, {
        path: "/api/v0/processes/start",
        headers: tcHeaders(tc),
        body,
      });
      expect(res.status).toBe(400);
    }
    const empty = await rawRequest(agent.url, {
      path: "/api/v0/processes/start",
      headers: tcHeaders(tc),
      body: {},
    });
    expect(empty.json()).toEqual({ message: "Command is required." });
    const bad = await rawRequest(agent.url, { path: "/api/v0/processes/start", body: "{nope" });
    expect(bad.json()).toEqual({ message: "Request body must be valid JSON." });
    expect(agent.allProcesses()).toHaveLength(0);
    expect((await agent.client.listProcesses({ chatId: tc.chatId })).processes).toHaveLength(0);
    // Nothing was recorded: a good request for the same call runs.
    await expect(
      agent.client.startProcess({ command: "true" }, { toolCall: tcToolCall(tc) }),
    ).resolves.toMatchObject({
      started: true,
    });
  });

  it("another chat cannot read, list, signal or cancel a process", async () => {
    const agent = await startAgent();
    const owner = { chatId: newChat(), message: 1, id: "a" };
    const started = await agent.client.startProcess(
      { command: "sleep 30" },
      { toolCall: tcToolCall(owner) },
    );
    const other = newChat();
    const notFound = { message: `Process "${started.id}" not found.` };
    const output = await rawRequest(agent.url, {
      path: `/api/v0/processes/${started.id}/output`,
      headers: { "Coder-Chat-Id": other },
    });
    expect(output.status).toBe(404);
    expect(output.json()).toEqual(notFound);
    const unknown = await rawRequest(agent.url, {
      path: `/api/v0/processes/00000000-0000-4000-8000-000000000000/output`,
      headers: { "Coder-Chat-Id": other },
    });
    expect(unknown.status).toBe(404);
    const signal = await rawRequest(agent.url, {
      path: `/api/v0/processes/${started.id}/signal`,
      headers: { "Coder-Chat-Id": other },
      body: { signal: "kill" },
    });
    expect(signal.status).toBe(404);
    expect(signal.json()).toEqual(notFound);
    expect((await agent.client.listProcesses({ chatId: other })).processes).toEqual([]);
    expect(
      (await agent.client.listProcesses({ chatId: owner.chatId })).processes.map((p) => p.id),
    ).toEqual([started.id]);
    // A request without a chat sees only processes started without one (issue 11).
    expect((await agent.client.listProcesses()).processes).toEqual([]);

    // Cancel with the other chat's headers derives another UUID: 400, and the process runs on.
    const cancel = await rawRequest(agent.url, {
      path: `/api/v0/tool-calls/${started.id}/cancel`,
      headers: tcHeaders({ ...owner, chatId: other }),
      body: { stop_if_run_age_below_ms: 60_000 },
    });
    expect(cancel.status).toBe(400);
    expect((await agent.client.processOutput(started.id)).running).toBe(true);
  });

  it("signal: kill and terminate reach the group; a finished process is 409; bad signals 400", async () => {
    const agent = await startAgent();
    const a = await agent.client.startProcess({ command: "sleep 30" });
    const res = await agent.client.signalProcess(a.id, "terminate");
    expect(res.message).toMatch(/terminate/);
    expect(await agent.client.processOutput(a.id, { wait: true })).toMatchObject({
      running: false,
      exit_code: -1,
    });
    await expect(agent.client.signalProcess(a.id, "kill")).rejects.toMatchObject({
      status: 409,
      message: `Process "${a.id}" is not running.`,
    });
    const bad = await rawRequest(agent.url, {
      path: `/api/v0/processes/${a.id}/signal`,
      body: { signal: "hup" },
    });
    expect(bad.status).toBe(400);
  });

  it("listing reaps processes that exited 5 minutes ago, except one whose tool call is current", async () => {
    const clock = new ManualClock();
    const agent = await startAgent({ clock });
    const chatId = newChat();
    const current = { chatId, message: 1, id: "a" };
    const p1 = await agent.client.startProcess(
      { command: "true" },
      { toolCall: tcToolCall(current) },
    );
    const plain = await agent.client.startProcess({ command: "true" });
    await agent.client.processOutput(p1.id, { chatId, wait: true });
    await agent.client.processOutput(plain.id, { wait: true });
    clock.advance(5 * 60_000 + 1);
    await agent.client.listProcesses(); // a list (of any chat) reaps
    expect(agent.allProcesses().map((p) => p.id)).toEqual([p1.id]);
    // A newer message makes the first call no longer current: now it is reaped.
    const p2 = await agent.client.startProcess(
      { command: "true" },
      { toolCall: tcToolCall({ chatId, message: 2, id: "a" }) },
    );
    await agent.client.processOutput(p2.id, { chatId, wait: true });
    await agent.client.listProcesses({ chatId });
    expect(agent.allProcesses().map((p) => p.id)).toEqual([p2.id]);
  });

  it("output with wait returns when the process exits", async () => {
    const agent = await startAgent();
    const a = await agent.client.startProcess({ command: "sleep 0.2; echo hi; exit 4" });
    expect(await agent.client.processOutput(a.id, { wait: true })).toMatchObject({
      running: false,
      exit_code: 4,
      output: "hi\n",
      command: "sleep 0.2; echo hi; exit 4",
    });
  });
});
