// The interrupt's result per tool (CHATD.md 7, 8): file tools get the real answer or "not
// applied", an agent without the contract gets the generic "interrupted" unknown, read-only
// tools send nothing. Real agents, except the agent that lacks the cancel route.

import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { useAgents } from "../../../test/support/agent.ts";
import { StaleToolCallError } from "./failures.ts";
import { interruptResult, unsentResult } from "./interrupt.ts";
import { runTool, type ToolCallRequest } from "./run.ts";
import { json, toolContext, useFakeAgents } from "./testing.ts";

const startAgent = useAgents();
const { fake } = useFakeAgents();

/** interruptResult, also answering what it told the billing callback. */
async function interrupted(...args: Parameters<typeof interruptResult>) {
  let started: boolean | undefined;
  const result = await interruptResult(args[0], args[1], {
    onStarted: (s) => {
      started = s;
    },
  });
  return { result, started };
}

describe("interrupt results of file tools on a real agent", () => {
  it("a write that ran gets its real answer, and counts as started", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const file = path.join(agent.dir, "w.txt");
    const call: ToolCallRequest = {
      toolCallId: "w",
      toolName: "write_file",
      input: { path: file, content: "hello\n" },
    };
    const live = await runTool(ctx, call);
    expect(live.result).toMatchObject({ status: "applied" });
    const { result, started } = await interrupted(ctx, call);
    expect(result).toEqual(live.result);
    expect(started).toBe(true);
    expect(await readFile(file, "utf8")).toBe("hello\n");
  });

  it("an edit that ran gets its diff; one that failed gets the agent's error, nothing applied", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const file = path.join(agent.dir, "e.txt");
    await writeFile(file, "x\n");
    const applied: ToolCallRequest = {
      toolCallId: "ok",
      toolName: "edit_files",
      input: { files: [{ path: file, edits: [{ old_text: "x", new_text: "xx" }] }] },
    };
    const live = await runTool(ctx, applied);
    expect((await interrupted(ctx, applied)).result).toEqual(live.result);
    expect(live.result).toMatchObject({ status: "applied", files: [{ path: file }] });

    const failing: ToolCallRequest = {
      toolCallId: "bad",
      toolName: "edit_files",
      input: { files: [{ path: file, edits: [{ old_text: "nothing like it", new_text: "y" }] }] },
    };
    const failed = await runTool(ctx, failing);
    expect(failed.result).toMatchObject({ status: "failed" });
    const { result, started } = await interrupted(ctx, failing);
    expect(result).toEqual(failed.result);
    expect(started).toBe(true);
    expect(await readFile(file, "utf8")).toBe("xx\n");
  });

  it("a write the agent never received is not applied, and a late arrival writes nothing", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const file = path.join(agent.dir, "never.txt");
    const call: ToolCallRequest = {
      toolCallId: "n",
      toolName: "write_file",
      input: { path: file, content: "late\n" },
    };
    const { result, started } = await interrupted(ctx, call);
    expect(result).toMatchObject({ status: "not_applied" });
    expect(started).toBe(false);
    // The request still in transit reaches the agent after the cancel: refused as stale (its
    // task commits nothing), and nothing is written.
    await expect(runTool(ctx, call)).rejects.toThrow(StaleToolCallError);
    expect(existsSync(file)).toBe(false);
  });

  it("calls never sent (streamed but not committed) are not run or not applied", () => {
    expect(unsentResult("execute")).toMatchObject({ status: "not_run" });
    expect(unsentResult("read_file")).toMatchObject({ status: "not_run" });
    expect(unsentResult("write_file")).toMatchObject({ status: "not_applied" });
    expect(unsentResult("edit_files")).toMatchObject({ status: "not_applied" });
  });
});

describe("interrupt results without the contract or without side effects", () => {
  it("an agent without the cancel route (404) gives the generic interrupted unknown", async () => {
    const old = await fake((req, res) =>
      json(res, 404, { message: `Route ${req.method} ${req.url} not found` }),
    );
    const ctx = toolContext(old.client);
    const exec = await interrupted(ctx, {
      toolCallId: "x",
      toolName: "execute",
      input: { command: "sleep 5" },
    });
    expect(exec.result).toMatchObject({ status: "unknown", reason: "interrupted" });
    expect(exec.result).toHaveProperty(
      "note",
      expect.stringContaining("interrupted before it produced a result"),
    );
    expect(exec.started).toBe(true);
    const write = await interrupted(ctx, {
      toolCallId: "w",
      toolName: "write_file",
      input: { path: "/tmp/x", content: "x" },
    });
    expect(write.result).toMatchObject({ status: "unknown", reason: "interrupted" });
    expect(write.result).toHaveProperty("note", expect.stringContaining("read_file"));
    expect(old.requests.map((r) => r.url)).toEqual([
      expect.stringMatching(/^\/api\/v0\/tool-calls\/[0-9a-f-]+\/cancel$/),
      expect.stringMatching(/^\/api\/v0\/tool-calls\/[0-9a-f-]+\/cancel$/),
    ]);
  });

  it("read-only tools and process_signal send no cancel and say what is known", async () => {
    const agent = await fake((_req, res) => json(res, 500, { message: "unexpected" }));
    const ctx = toolContext(agent.client);
    const read = await interruptResult(ctx, {
      toolCallId: "r",
      toolName: "read_file",
      input: { path: "/tmp/x" },
    });
    expect(read).toMatchObject({
      status: "error",
      message: expect.stringContaining("nothing was changed"),
    });
    const signal = await interruptResult(ctx, {
      toolCallId: "s",
      toolName: "process_signal",
      input: { process_id: "p", signal: "kill" },
    });
    expect(signal).toMatchObject({
      status: "error",
      message: expect.stringContaining("may or may not"),
    });
    expect(agent.requests).toEqual([]);
  });
});
