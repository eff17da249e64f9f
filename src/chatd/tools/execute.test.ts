import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { JumpClock, useAgents } from "../../../test/support/agent.ts";
import { runTool } from "./run.ts";
import { toolContext, uuidFor } from "./testing.ts";

const startAgent = useAgents();

/** The agent's clock, where a grace of 0 ms has already passed when it is set. */
class ExpiredGraceClock extends JumpClock {
  override setTimer(ms: number, fn: () => void) {
    if (ms > 0) return super.setTimer(ms, fn);
    fn();
    return { cancel: () => undefined };
  }
}

describe("execute on a real agent", () => {
  it("foreground completes with exit code and output", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const out = await runTool(ctx, {
      toolCallId: "toolu_1",
      toolName: "execute",
      input: { command: "echo hello; exit 3" },
    });
    expect(out.result).toMatchObject({ status: "completed", exit_code: 3, output: "hello\n" });
    expect(out.result).toHaveProperty("wall_duration_ms");
    expect(out.billable).toBe(true);
    expect(out.endedAt).toBeGreaterThanOrEqual(out.startedAt);
  });

  it("past its timeout is timed out with the tool call uuid and process output reads it to completion", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const out = await runTool(ctx, {
      toolCallId: "toolu_slow",
      toolName: "execute",
      input: { command: "echo started; sleep 2.5; echo done", timeout: "1s" },
    });
    const uuid = uuidFor(ctx, "toolu_slow");
    expect(out.result).toMatchObject({ status: "timed_out", process_id: uuid });
    if (out.result.status !== "timed_out") throw new Error("not timed out");
    expect(out.result.output).toContain("started");
    expect(out.result.note).toContain(uuid);

    const later = await runTool(ctx, {
      toolCallId: "toolu_read",
      toolName: "process_output",
      input: { process_id: uuid, wait_timeout: "5s" },
    });
    expect(later.result).toMatchObject({
      status: "completed",
      exit_code: 0,
      output: "started\ndone\n",
    });
  });

  it("background answers at once and the process keeps running", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const uuid = uuidFor(ctx, "toolu_bg");
    const out = await runTool(ctx, {
      toolCallId: "toolu_bg",
      toolName: "execute",
      input: { command: "sleep 30", run_in_background: true },
    });
    expect(out.result).toMatchObject({ status: "background", process_id: uuid });
    const list = await runTool(ctx, { toolCallId: "l", toolName: "process_list", input: {} });
    expect(list.result).toMatchObject({
      status: "completed",
      processes: [{ id: uuid, running: true, background: true }],
    });
    const peek = await runTool(ctx, {
      toolCallId: "p",
      toolName: "process_output",
      input: { process_id: uuid, wait_timeout: "0s" },
    });
    expect(peek.result).toMatchObject({ status: "timed_out", process_id: uuid });
    const stop = await runTool(ctx, {
      toolCallId: "s",
      toolName: "process_signal",
      input: { process_id: uuid, signal: "kill" },
    });
    expect(stop.result).toMatchObject({ status: "completed" });
  });

  it("retried task starts no second process and its deadline counts from the first start", async () => {
    const clock = new JumpClock();
    const agent = await startAgent({ clock });
    const file = path.join(agent.dir, "runs.txt");
    const call = {
      toolCallId: "toolu_retry",
      toolName: "execute",
      input: { command: `echo run >> ${file}; sleep 30`, timeout: "10s" },
    };
    const first = new AbortController();
    const ctx = toolContext(agent.client, { signal: first.signal });
    setTimeout(() => first.abort(new Error("attempt timed out")), 300);
    await expect(runTool(ctx, call)).rejects.toThrow("attempt timed out");

    // The first run is 11 s old by the agent's clock: past the 10 s timeout.
    clock.jump(11_000);
    const retry = await runTool({ ...ctx, signal: new AbortController().signal }, call);
    expect(retry.result).toMatchObject({
      status: "timed_out",
      process_id: uuidFor(ctx, "toolu_retry"),
    });
    expect(retry.endedAt - retry.startedAt).toBeLessThan(2_000);
    expect(await readFile(file, "utf8")).toBe("run\n");
  });

  it("repeated completed call is replayed not rerun", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "once.txt");
    const ctx = toolContext(agent.client);
    const call = {
      toolCallId: "toolu_once",
      toolName: "execute",
      input: { command: `echo run >> ${file}; echo ok` },
    };
    const a = await runTool(ctx, call);
    const b = await runTool(ctx, call);
    expect(a.result).toMatchObject({ status: "completed", output: "ok\n" });
    expect(b.result).toMatchObject({ status: "completed", output: "ok\n" });
    expect(await readFile(file, "utf8")).toBe("run\n");
  });

  it("agent started after tool call is unknown with the uuid", async () => {
    const agent = await startAgent(); // up for 60 s by its clock
    const ctx = toolContext(agent.client, { toolCallAgeMs: 120_000 });
    const out = await runTool(ctx, {
      toolCallId: "toolu_old",
      toolName: "execute",
      input: { command: "echo hi" },
    });
    expect(out.result).toMatchObject({
      status: "unknown",
      reason: "agent_started_after_tool_call",
      process_id: uuidFor(ctx, "toolu_old"),
    });
    expect(out.billable).toBe(false);
    expect(agent.allProcesses()).toEqual([]);
  });

  it("start failure is an error with the agents message", async () => {
    const agent = await startAgent();
    const out = await runTool(toolContext(agent.client), {
      toolCallId: "toolu_wd",
      toolName: "execute",
      input: { command: "true", workdir: "/nonexistent/tether-dir" },
    });
    expect(out.result).toMatchObject({ status: "error" });
    if (out.result.status !== "error") throw new Error("not an error");
    expect(out.result.message).toContain("did not run: Failed to start process.");
    expect(out.billable).toBe(false);
  });

  it("task abort stops waiting and throws while the process runs", async () => {
    const agent = await startAgent();
    const task = new AbortController();
    const ctx = toolContext(agent.client, { signal: task.signal });
    const reason = new Error("task canceled");
    const running = runTool(ctx, {
      toolCallId: "t",
      toolName: "execute",
      input: { command: "sleep 5" },
    });
    // Abort once the process runs, whatever the machine's load.
    const end = Date.now() + 5_000;
    while (agent.allProcesses().length === 0 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const began = Date.now();
    task.abort(reason);
    await expect(running).rejects.toBe(reason);
    expect(Date.now() - began).toBeLessThan(1_000);
    const processes = agent.allProcesses();
    expect(processes).toMatchObject([{ id: uuidFor(ctx, "t"), running: true }]);
    // An aborted task sends nothing at all.
    await expect(
      runTool(ctx, { toolCallId: "u", toolName: "execute", input: { command: "true" } }),
    ).rejects.toBe(reason);
    expect(agent.allProcesses()).toHaveLength(1);
  });

  it("completed output holds every byte the command printed before it exited, on a busy agent too", async () => {
    // A busy agent reads a shell's exit before the rest of its output, and its grace has passed
    // by the time it reads more (a 0 ms grace that fires at once). A noisy process fills the
    // spawner's channel while this loop (the agent's) is blocked, so the spawner holds back the
    // command's last bytes and relays its exit first. Reported: 12,698 of 28,192 bytes came back.
    const agent = await startAgent({ clock: new ExpiredGraceClock(), exitGraceMs: 0 });
    await agent.client.startProcess({ command: "yes 0123456789abcdef0123456789abcdef" });
    const ctx = toolContext(agent.client);
    const command = "sleep 0.5; seq 1 2000; sleep 0.2; seq 2001 5500";
    const running = runTool(ctx, {
      toolCallId: "toolu_seq",
      toolName: "execute",
      input: { command },
    });
    const end = Date.now() + 5_000;
    while ((await agent.client.listProcesses()).processes.length < 2 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const blockedUntil = Date.now() + 1_500;
    while (Date.now() < blockedUntil) {
      // busy: the agent reads nothing the spawner relays meanwhile
    }
    const out = await running;
    const seq = Array.from({ length: 5_500 }, (_, i) => `${i + 1}\n`).join("");
    expect(out.result).toMatchObject({ status: "completed", exit_code: 0 });
    expect(out.result).not.toHaveProperty("truncated");
    const { output } = out.result as { output: string };
    expect(Buffer.byteLength(output)).toBe(Buffer.byteLength(seq));
    expect(output).toBe(seq);
  });

  it("process output of an unknown process says not found", async () => {
    const agent = await startAgent();
    const out = await runTool(toolContext(agent.client), {
      toolCallId: "x",
      toolName: "process_output",
      input: { process_id: "00000000-0000-4000-8000-000000000000", wait_timeout: "1s" },
    });
    expect(out.result).toMatchObject({ status: "error" });
    if (out.result.status !== "error") throw new Error("not an error");
    expect(out.result.message).toContain("not found");
  });
});
