import { describe, expect, it } from "vitest";
import { AgentClient, toMessageId } from "../../contract/index.ts";
import { useAgents } from "../../../test/support/agent.ts";
import { StaleToolCallError } from "./failures.ts";
import { runTool } from "./run.ts";
import { json, toolContext, useFakeAgents, uuidFor } from "./testing.ts";

const startAgent = useAgents();
const { fake, closedPort } = useFakeAgents();

describe("results when the agent fails", () => {
  it("unreachable agent is unknown agent unreachable at once", async () => {
    const client = new AgentClient({ baseUrl: await closedPort() });
    const ctx = toolContext(client);
    const began = Date.now();
    const out = await runTool(ctx, {
      toolCallId: "toolu_x",
      toolName: "execute",
      input: { command: "echo hi" },
    });
    client.close();
    expect(out.result).toMatchObject({
      status: "unknown",
      reason: "agent_unreachable",
      process_id: uuidFor(ctx, "toolu_x"),
    });
    expect(out.billable).toBe(false);
    expect(Date.now() - began).toBeLessThan(1_000);
  });

  it("silent agent is unknown agent no answer within the answer timeout", async () => {
    const silent = await fake(() => undefined); // accepts, never answers
    const ctx = toolContext(silent.client, { agentAnswerTimeoutMs: 300 });
    const began = Date.now();
    const out = await runTool(ctx, {
      toolCallId: "toolu_s",
      toolName: "write_file",
      input: { path: "/tmp/never", content: "x" },
    });
    expect(out.result).toMatchObject({ status: "unknown", reason: "agent_no_answer" });
    if (out.result.status !== "unknown") throw new Error("not unknown");
    expect(out.result.note).toContain("check the file");
    expect(Date.now() - began).toBeGreaterThanOrEqual(290);
    expect(Date.now() - began).toBeLessThan(1_000);
  });

  it("stale refusal throws stale tool call error and starts nothing", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client, { messageId: toMessageId(2)! });
    await runTool(ctx, {
      toolCallId: "toolu_new",
      toolName: "write_file",
      input: { path: `${agent.dir}/f.txt`, content: "x" },
    });
    const stale = { ...ctx, messageId: toMessageId(1)! };
    await expect(
      runTool(stale, { toolCallId: "toolu_old", toolName: "execute", input: { command: "true" } }),
    ).rejects.toBeInstanceOf(StaleToolCallError);
    expect(agent.allProcesses()).toEqual([]);
  });

  it("input mismatch is unknown not repeated", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const file = `${agent.dir}/m.txt`;
    await runTool(ctx, {
      toolCallId: "toolu_m",
      toolName: "write_file",
      input: { path: file, content: "a" },
    });
    const out = await runTool(ctx, {
      toolCallId: "toolu_m",
      toolName: "write_file",
      input: { path: file, content: "b" },
    });
    expect(out.result).toMatchObject({ status: "unknown", reason: "input_mismatch" });
    expect(out.billable).toBe(false);
  });

  it("agent without the contract is used with the id it gives", async () => {
    const legacy = await fake((req, res) => {
      if (req.url === "/api/v0/processes/start") json(res, 200, { id: "legacy-1", started: true });
      else if (req.url.startsWith("/api/v0/processes/legacy-1/output"))
        json(res, 200, { output: "hi\n", running: false, exit_code: 0 });
      else json(res, 404, { message: "no" });
    });
    const ctx = toolContext(legacy.client);
    const fg = await runTool(ctx, {
      toolCallId: "a",
      toolName: "execute",
      input: { command: "x" },
    });
    expect(fg.result).toMatchObject({ status: "completed", exit_code: 0, output: "hi\n" });
    expect(legacy.requests.map((r) => r.url)).toContain(
      "/api/v0/processes/legacy-1/output?wait=true",
    );
    const bg = await runTool(ctx, {
      toolCallId: "b",
      toolName: "execute",
      input: { command: "x", run_in_background: true },
    });
    expect(bg.result).toMatchObject({ status: "background", process_id: "legacy-1" });
  });

  it("agent that does not wait is polled until the deadline", async () => {
    const legacy = await fake((req, res) => {
      if (req.url === "/api/v0/processes/start") json(res, 200, { id: "legacy-2", started: true });
      else json(res, 200, { output: "partial", running: true });
    });
    const out = await runTool(toolContext(legacy.client), {
      toolCallId: "a",
      toolName: "execute",
      input: { command: "x", timeout: "600ms" },
    });
    expect(out.result).toMatchObject({
      status: "timed_out",
      process_id: "legacy-2",
      output: "partial",
    });
    // start, a few paced waits, then one plain read: not a hot loop.
    expect(legacy.requests.length).toBeLessThan(8);
  });

  it("timed out is never claimed when the final read fails", async () => {
    let uuid = "";
    const hangs = await fake((req, res) => {
      if (req.url === "/api/v0/processes/start") json(res, 200, { id: uuid, started: true });
      // output requests never get an answer
    });
    const ctx = toolContext(hangs.client, { agentAnswerTimeoutMs: 300 });
    uuid = uuidFor(ctx, "toolu_h");
    const out = await runTool(ctx, {
      toolCallId: "toolu_h",
      toolName: "execute",
      input: { command: "x", timeout: "300ms" },
    });
    expect(out.result).toMatchObject({
      status: "unknown",
      reason: "agent_no_answer",
      process_id: uuid,
    });
    expect(out.billable).toBe(true);
  });
});

describe("input and headers", () => {
  it("bad input is an error naming the field without any request", async () => {
    const agent = await fake((_req, res) => json(res, 500, { message: "must not be called" }));
    const ctx = toolContext(agent.client);
    const cases: [string, unknown, string][] = [
      ["execute", { command: 5 }, "command"],
      ["execute", { command: "ls", timeout: "10" }, "timeout"],
      ["execute", { command: "ls", timeout: "0s" }, "timeout"],
      ["process_output", { process_id: "p", wait_timeout: "soon" }, "wait_timeout"],
      ["process_signal", { process_id: "p", signal: "hup" }, "signal"],
      ["read_file", { path: "/x", offset: 0 }, "offset"],
      ["edit_files", { files: [{ path: "/x", edits: [] }] }, "files.0.edits"],
      ["edit_files", undefined, "arguments"],
      ["rm_rf", {}, "Unknown tool"],
    ];
    for (const [toolName, input, field] of cases) {
      const out = await runTool(ctx, { toolCallId: "t", toolName, input });
      expect(out.result.status, toolName).toBe("error");
      if (out.result.status !== "error") continue;
      expect(out.result.message).toContain(field);
      expect(out.billable).toBe(false);
      expect(out.endedAt).toBe(out.startedAt);
    }
    expect(agent.requests).toEqual([]);
  });

  it("side effect tools send tool call headers and reads send only the chat", async () => {
    const agent = await fake((req, res) => {
      if (req.url.startsWith("/api/v0/processes/start")) json(res, 200, { id: "p", started: true });
      else if (req.url.startsWith("/api/v0/processes/list")) json(res, 200, { processes: [] });
      else if (req.url.includes("/signal")) json(res, 200, { message: "sent" });
      else if (req.url.includes("/output"))
        json(res, 200, { output: "", running: false, exit_code: 0 });
      else if (req.url.startsWith("/api/v0/read-file-lines"))
        json(res, 200, { success: true, content: "1\tx", lines_read: 1, total_lines: 1 });
      else json(res, 200, { message: "ok" });
    });
    const ctx = toolContext(agent.client, { toolCallAgeMs: 1_234 });
    const calls: [string, unknown][] = [
      ["execute", { command: "true" }],
      ["process_output", { process_id: "p", wait_timeout: "0s" }],
      ["process_list", {}],
      ["process_signal", { process_id: "p", signal: "terminate" }],
      ["read_file", { path: "/x" }],
      ["write_file", { path: "/x", content: "y" }],
      ["edit_files", { files: [{ path: "/x", edits: [{ old_text: "a", new_text: "b" }] }] }],
    ];
    for (const [toolName, input] of calls) {
      await runTool(ctx, { toolCallId: "call/1", toolName, input });
    }
    const sent = agent.requests.map((r) => ({
      path: r.url.split("?")[0],
      chat: r.headers["coder-chat-id"],
      id: r.headers["coder-tool-call-id"],
      message: r.headers["coder-tool-call-message-id"],
    }));
    const chat = ctx.chatId;
    const tc = { chat, id: "call%2F1", message: "1" };
    const none = { id: undefined, message: undefined };
    expect(sent).toEqual([
      { path: "/api/v0/processes/start", ...tc },
      { path: "/api/v0/processes/p/output", chat, ...none }, // execute's wait
      { path: "/api/v0/processes/p/output", chat, ...none },
      { path: "/api/v0/processes/list", chat, ...none },
      { path: "/api/v0/processes/p/signal", chat, ...none },
      { path: "/api/v0/read-file-lines", chat: undefined, ...none },
      { path: "/api/v0/write-file", ...tc },
      { path: "/api/v0/edit-files", ...tc },
    ]);
    const age = Number(agent.requests[0]!.headers["coder-tool-call-age-ms"]);
    expect(age).toBeGreaterThanOrEqual(1_234);
  });
  it("a start whose connection is lost after it went out is sent again: the same call, its age grown by the wait", async () => {
    let n = 0;
    const agent = await fake((req, res) => {
      if (++n === 1) {
        res.socket?.destroy(); // the answer is lost
        return;
      }
      json(res, 200, { id: uuidFor(ctx, "toolu_lost"), started: true });
    });
    const ctx = toolContext(agent.client, { toolCallAgeMs: 5_000 });
    const out = await runTool(ctx, {
      toolCallId: "toolu_lost",
      toolName: "execute",
      input: { command: "sleep 60", run_in_background: true },
    });
    expect(out.result).toMatchObject({ status: "background" });
    expect(agent.requests).toHaveLength(2);
    const [first, again] = agent.requests.map((r) => r.headers);
    for (const h of ["coder-tool-call-message-id", "coder-tool-call-id"])
      expect(again![h]).toBe(first![h]);
    const age = (h: typeof first) => Number(h!["coder-tool-call-age-ms"]);
    expect(age(first)).toBeGreaterThanOrEqual(5_000);
    // Sent again after a pause of 100 ms: the call is that much older (an age too young could
    // let a restarted agent run a call it cannot vouch for).
    expect(age(again) - age(first)).toBeGreaterThanOrEqual(100);
  });

  it("a read whose answer is lost is asked again; an agent that loses every answer is an error to try later", async () => {
    let n = 0;
    const flaky = await fake((_req, res) => {
      if (++n === 1) res.socket?.destroy();
      else json(res, 200, { success: true, content: "x\n", lines_read: 1, total_lines: 1 });
    });
    const ctx = toolContext(flaky.client);
    const read = { toolCallId: "r", toolName: "read_file", input: { path: "/a" } } as const;
    expect((await runTool(ctx, read)).result).toMatchObject({
      status: "completed",
      content: "x\n",
    });
    expect(flaky.requests).toHaveLength(2);

    const lost = await fake((_req, res) => res.socket?.destroy());
    const out = await runTool(toolContext(lost.client), read);
    expect(out.result).toMatchObject({ status: "error" });
    expect(lost.requests).toHaveLength(4); // the first try and three more
  });
});
