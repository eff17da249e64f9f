import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { useAgents } from "../../../test/support/agent.ts";
import type { ReadFileResult } from "./results.ts";
import { runTool } from "./run.ts";
import { toolContext } from "./testing.ts";

const startAgent = useAgents();

describe("file tools on a real agent", () => {
  it("write file is applied and read file reads it back", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const file = path.join(agent.dir, "a", "b.txt");
    const written = await runTool(ctx, {
      toolCallId: "w",
      toolName: "write_file",
      input: { path: file, content: "one\ntwo\nthree\n" },
    });
    expect(written.result).toMatchObject({ status: "applied" });
    expect(written.billable).toBe(true);

    const all = await runTool(ctx, {
      toolCallId: "r",
      toolName: "read_file",
      input: { path: file },
    });
    expect(all.result).toEqual({
      status: "completed",
      kind: "file",
      path: file,
      content: "1\tone\n2\ttwo\n3\tthree",
      lines_read: 3,
      total_lines: 3,
    });
    const part = await runTool(ctx, {
      toolCallId: "r2",
      toolName: "read_file",
      input: { path: file, offset: 2, limit: 1 },
    });
    expect(part.result).toMatchObject({ content: "2\ttwo", lines_read: 1 });
    const read = part.result as ReadFileResult;
    if (read.status !== "completed" || read.kind !== "file") throw new Error("not a file");
    expect(read.note).toContain("offset 3");
  });

  it("read file of a directory gives its listing", async () => {
    const agent = await startAgent();
    await writeFile(path.join(agent.dir, "x.txt"), "x");
    const out = await runTool(toolContext(agent.client), {
      toolCallId: "d",
      toolName: "read_file",
      input: { path: agent.dir },
    });
    expect(out.result).toMatchObject({
      status: "completed",
      kind: "directory",
      entries: [{ name: "x.txt", is_dir: false }],
    });
  });

  it("read file errors are errors with the agents message", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const missing = await runTool(ctx, {
      toolCallId: "m",
      toolName: "read_file",
      input: { path: path.join(agent.dir, "nope.txt") },
    });
    expect(missing.result).toMatchObject({ status: "error" });
    const relative = await runTool(ctx, {
      toolCallId: "rel",
      toolName: "read_file",
      input: { path: "relative.txt" },
    });
    expect(relative.result).toMatchObject({ status: "error" });
    if (relative.result.status !== "error") throw new Error("not an error");
    expect(relative.result.message).toContain("absolute");
  });

  it("edit files is applied once with a diff and a retry replays it", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "e.txt");
    await writeFile(file, "x\n");
    const ctx = toolContext(agent.client);
    const call = {
      toolCallId: "e",
      toolName: "edit_files",
      input: { files: [{ path: file, edits: [{ old_text: "x", new_text: "xx" }] }] },
    };
    const first = await runTool(ctx, call);
    const again = await runTool(ctx, call);
    expect(first.result).toMatchObject({ status: "applied", files: [{ path: file }] });
    if (first.result.status !== "applied" || !("files" in first.result)) throw new Error("diff");
    expect(first.result.files?.[0]?.diff).toContain("+xx");
    expect(again.result).toEqual(first.result);
    expect(await readFile(file, "utf8")).toBe("xx\n");
  });

  it("edit files that fails applies nothing", async () => {
    const agent = await startAgent();
    const a = path.join(agent.dir, "a.txt");
    const b = path.join(agent.dir, "b.txt");
    await writeFile(a, "alpha\n");
    await writeFile(b, "beta\n");
    const out = await runTool(toolContext(agent.client), {
      toolCallId: "f",
      toolName: "edit_files",
      input: {
        files: [
          { path: a, edits: [{ old_text: "alpha", new_text: "ALPHA" }] },
          { path: b, edits: [{ old_text: "gamma", new_text: "GAMMA" }] },
        ],
      },
    });
    expect(out.result).toMatchObject({ status: "failed" });
    if (out.result.status !== "failed") throw new Error("not failed");
    expect(out.result.note).toContain("Nothing was applied");
    expect(out.billable).toBe(false);
    expect(await readFile(a, "utf8")).toBe("alpha\n");
    expect(await readFile(b, "utf8")).toBe("beta\n");
  });

  it("write after an agent restart is unknown and says check the file", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "late.txt");
    const out = await runTool(toolContext(agent.client, { toolCallAgeMs: 120_000 }), {
      toolCallId: "late",
      toolName: "write_file",
      input: { path: file, content: "x" },
    });
    expect(out.result).toMatchObject({
      status: "unknown",
      reason: "agent_started_after_tool_call",
    });
    if (out.result.status !== "unknown") throw new Error("not unknown");
    expect(out.result.note).toContain("check the file");
    await expect(readFile(file)).rejects.toThrow();
  });
});

describe("relative paths in the file tools", () => {
  it("every file tool resolves a relative path against the workspace directory and echoes the absolute one", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client, { workspaceDir: agent.dir });
    const abs = path.join(agent.dir, "sub", "rel.txt");
    const written = await runTool(ctx, {
      toolCallId: "w",
      toolName: "write_file",
      input: { path: "sub/rel.txt", content: "alpha\n" },
    });
    expect(written.result).toMatchObject({ status: "applied", path: abs });
    expect(await readFile(abs, "utf8")).toBe("alpha\n");

    const edited = await runTool(ctx, {
      toolCallId: "e",
      toolName: "edit_files",
      input: {
        files: [{ path: "./sub/../sub/rel.txt", edits: [{ old_text: "alpha", new_text: "beta" }] }],
      },
    });
    expect(edited.result).toMatchObject({
      status: "applied",
      paths: [abs],
      files: [{ path: abs }],
    });
    expect(await readFile(abs, "utf8")).toBe("beta\n");

    const read = await runTool(ctx, {
      toolCallId: "r",
      toolName: "read_file",
      input: { path: "sub/rel.txt" },
    });
    expect(read.result).toMatchObject({
      status: "completed",
      kind: "file",
      path: abs,
      content: "1\tbeta",
    });

    const listing = await runTool(ctx, {
      toolCallId: "l",
      toolName: "read_file",
      input: { path: "sub" },
    });
    expect(listing.result).toMatchObject({
      status: "completed",
      kind: "directory",
      path: path.join(agent.dir, "sub"),
      entries: [{ name: "rel.txt", is_dir: false }],
    });
  });

  it("a relative path without a known workspace directory is an error that sends nothing", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    for (const [toolName, input] of [
      ["read_file", { path: "a.txt" }],
      ["write_file", { path: "a.txt", content: "x" }],
      ["edit_files", { files: [{ path: "a.txt", edits: [{ old_text: "x", new_text: "y" }] }] }],
    ] as const) {
      const out = await runTool(ctx, { toolCallId: toolName, toolName, input });
      expect(out.result, toolName).toMatchObject({
        status: "error",
        message: expect.stringContaining("absolute path"),
      });
      expect(out.billable).toBe(false);
    }
  });
});
