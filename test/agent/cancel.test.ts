// The cancel route against a real agent and real processes (CONTRACT.md 7, Cancel).

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  ManualClock,
  RUN_AGE_HEADER,
  type CancelToolCallResponse,
} from "../../src/contract/index.ts";
import { headerValues, rawRequest } from "../support/http.ts";
import { newChat, tcHeaders, tcToolCall, tcUuid, type TestToolCall } from "../support/toolcall.ts";
import { until, useAgents, type TestAgent } from "../support/agent.ts";

const startAgent = useAgents();

function start(a: TestAgent, tc: TestToolCall, command: string, background = false) {
  return a.client.startProcess({ command, background }, { toolCall: tcToolCall(tc) });
}

function cancel(a: TestAgent, tc: TestToolCall, stopIfRunAgeBelowMs: number | null | string = 0) {
  return rawRequest(a.url, {
    path: `/api/v0/tool-calls/${tcUuid(tc)}/cancel`,
    headers: tcHeaders(tc),
    body: { stop_if_run_age_below_ms: stopIfRunAgeBelowMs },
  });
}

async function processAlive(a: TestAgent, id: string): Promise<boolean> {
  return (await a.client.processOutput(id)).running;
}

describe("cancel", () => {
  it("never received: started false, and a later start gets tool_call_canceled and never runs", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 3, id: "call_1" };
    const res = await cancel(agent, tc, 10_000);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ started: false });
    expect(headerValues(res, RUN_AGE_HEADER)).toEqual([]);
    const marker = path.join(agent.dir, "ran");
    await expect(start(agent, tc, `touch ${marker}`)).rejects.toMatchObject({
      code: "tool_call_canceled",
    });
    expect(existsSync(marker)).toBe(false);
    expect((await cancel(agent, tc)).json()).toEqual({ started: false });
  });

  it("a running process below the threshold is killed: canceled, partial output, run age", async () => {
    const clock = new ManualClock();
    const agent = await startAgent({ clock });
    const tc = { chatId: newChat(), message: 3, id: "call_1" };
    const started = await start(agent, tc, "echo early; sleep 30; echo late");
    await until(async () =>
      (await agent.client.processOutput(started.id)).output.includes("early"),
    );
    clock.advance(700);
    const res = await cancel(agent, tc, 1_000);
    const body = res.json<CancelToolCallResponse>();
    expect(body.started).toBe(true);
    if (!body.started) return;
    expect(body.status_code).toBe(200);
    expect(body.content_type).toBe("application/json");
    expect(JSON.parse(Buffer.from(body.body, "base64").toString())).toEqual({
      id: tcUuid(tc),
      started: true,
    });
    expect(body.process).toMatchObject({
      running: false,
      canceled: true,
      exit_code: -1,
      run_age_ms: 700,
    });
    expect(body.process?.output).toBe("early\n");
    expect(headerValues(res, RUN_AGE_HEADER)).toEqual(["700"]);
  });

  it("at or above the threshold, or with threshold 0 or negative, the process is left running", async () => {
    const clock = new ManualClock();
    const agent = await startAgent({ clock });
    const chatId = newChat();
    const calls = ["a", "b", "c", "d"].map((id) => ({ chatId, message: 4, id }));
    const ids = [];
    for (const tc of calls) ids.push((await start(agent, tc, "sleep 30")).id);
    clock.advance(1_000);
    const thresholds = [1_000, 999, 0, -5];
    for (const [i, tc] of calls.entries()) {
      const body = (await cancel(agent, tc, thresholds[i])).json<CancelToolCallResponse>();
      expect(body.started && body.process).toMatchObject({
        running: true,
        canceled: false,
        run_age_ms: 1_000,
      });
      expect(await processAlive(agent, ids[i]!)).toBe(true);
    }
  });

  it("an absent or null threshold is 0, and a non-integer one is refused with nothing recorded", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const started = await start(agent, tc, "sleep 30");
    const nullBody = (await cancel(agent, tc, null)).json<CancelToolCallResponse>();
    expect(nullBody.started && nullBody.process?.running).toBe(true);
    const absent = await rawRequest(agent.url, {
      path: `/api/v0/tool-calls/${tcUuid(tc)}/cancel`,
      headers: tcHeaders(tc),
      body: {},
    });
    expect(absent.json<CancelToolCallResponse>().started).toBe(true);
    for (const bad of ["100", 1.5]) {
      const res = await cancel(agent, tc, bad);
      expect(res.status).toBe(400);
      expect(res.json<{ message: string }>().message).toMatch(/stop_if_run_age_below_ms/);
    }
    const notJson = await rawRequest(agent.url, {
      path: `/api/v0/tool-calls/${tcUuid({ ...tc, id: "never" })}/cancel`,
      headers: tcHeaders({ ...tc, id: "never" }),
      body: "{",
    });
    expect(notJson.status).toBe(400);
    // Nothing was recorded for "never": its start still runs.
    await expect(start(agent, { ...tc, id: "never" }, "true")).resolves.toMatchObject({
      started: true,
    });
    expect(await processAlive(agent, started.id)).toBe(true);
  });

  it("an exited process answers its exit code and is not canceled", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const started = await start(agent, tc, "echo done; exit 3");
    await agent.client.processOutput(started.id, { wait: true });
    const body = (await cancel(agent, tc, 60_000)).json<CancelToolCallResponse>();
    expect(body.started && body.process).toMatchObject({
      running: false,
      canceled: false,
      exit_code: 3,
      output: "done\n",
    });
  });

  it("a repeated cancel still says canceled", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    await start(agent, tc, "sleep 30");
    const first = (await cancel(agent, tc, 60_000)).json<CancelToolCallResponse>();
    const again = (await cancel(agent, tc, 0)).json<CancelToolCallResponse>();
    expect(first.started && first.process?.canceled).toBe(true);
    expect(again.started && again.process).toMatchObject({ canceled: true, running: false });
  });

  it("a kill through /signal is not canceled", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const started = await start(agent, tc, "sleep 30");
    await agent.client.signalProcess(started.id, "kill");
    await agent.client.processOutput(started.id, { wait: true });
    const body = (await cancel(agent, tc, 60_000)).json<CancelToolCallResponse>();
    expect(body.started && body.process).toMatchObject({
      running: false,
      canceled: false,
      exit_code: -1,
    });
  });

  it("a cancel kills grandchildren too: `sleep 100 & sleep 100` leaves no survivor", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const sleep = `sleep 100.${Math.floor(Math.random() * 1e9)}`; // unique to this test
    await start(agent, tc, `${sleep} & ${sleep}`);
    await until(() => pgrepCount(sleep) === 2);
    const body = (await cancel(agent, tc, 60_000)).json<CancelToolCallResponse>();
    expect(body.started && body.process?.canceled).toBe(true);
    await until(() => pgrepCount(sleep) === 0, 3_000);
  });

  it("spawn failure is recorded as 500, and cancel reports started with status 500 and no process", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const req = { command: "true", workdir: path.join(agent.dir, "missing") };
    await expect(
      agent.client.startProcess(req, { toolCall: tcToolCall(tc) }),
    ).rejects.toMatchObject({
      status: 500,
      message: "Failed to start process.",
    });
    await expect(
      agent.client.startProcess(req, { toolCall: tcToolCall(tc) }),
    ).rejects.toMatchObject({
      status: 500,
    });
    const body = (await cancel(agent, tc, 60_000)).json<CancelToolCallResponse>();
    expect(body).toMatchObject({ started: true, status_code: 500 });
    expect(body.started && body.process).toBeUndefined();
  });

  it("a wrong path ID or another chat's ID is 400 and records nothing", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 4, id: "a" };
    const other = { ...tc, chatId: newChat() };
    for (const id of [tcUuid({ ...tc, id: "b" }), tcUuid(other), "not-a-uuid"]) {
      const res = await rawRequest(agent.url, {
        path: `/api/v0/tool-calls/${id}/cancel`,
        headers: tcHeaders(tc),
        body: { stop_if_run_age_below_ms: 0 },
      });
      expect(res.status).toBe(400);
    }
    const noHeaders = await rawRequest(agent.url, {
      path: `/api/v0/tool-calls/${tcUuid(tc)}/cancel`,
      headers: { "Coder-Chat-Id": tc.chatId },
      body: {},
    });
    expect(noHeaders.status).toBe(400);
    // Nothing was recorded: the start still runs.
    await expect(start(agent, tc, "true")).resolves.toMatchObject({ id: tcUuid(tc) });
  });

  it("stale and agent-started-after refusals are coded 409s", async () => {
    const agent = await startAgent();
    const chatId = newChat();
    await start(agent, { chatId, message: 9, id: "a" }, "true");
    const stale = await cancel(agent, { chatId, message: 8, id: "a" });
    expect(stale.status).toBe(409);
    expect(stale.json()).toMatchObject({ code: "stale_tool_call" });
    const restarted = await cancel(agent, {
      chatId: newChat(),
      message: 1,
      id: "a",
      ageMs: 3_600_000,
    });
    expect(restarted.status).toBe(409);
    expect(restarted.json()).toMatchObject({ code: "agent_started_after_tool_call" });
  });

  it("the client's cancel sends the headers and reads the run age", async () => {
    const agent = await startAgent();
    const tc = { chatId: newChat(), message: 2, id: "call/1 é" };
    await start(agent, tc, "sleep 30");
    const answer = await agent.client.cancelToolCall(tcToolCall(tc), 60_000);
    expect(answer.started && answer.process?.canceled).toBe(true);
    expect(answer.runAgeMs).toBeGreaterThanOrEqual(0);
  });
});

/** Processes whose command line is exactly `pattern` (the shell's own line holds more). */
function pgrepCount(pattern: string): number {
  try {
    return execFileSync("pgrep", ["-x", "-f", pattern]).toString().trim().split("\n").length;
  } catch {
    return 0;
  }
}
