import { describe, expect, it } from "vitest";
import { AUDIT_TEXT_MAX_CHARS, toolCallTarget } from "./audit-tool-calls.ts";

describe("toolCallTarget", () => {
  it("records what a call acts on by tool, storably and bounded, never contents", () => {
    const call = (toolName: string, args: unknown) => ({ toolCallId: "c", toolName, args });
    expect(toolCallTarget(call("execute", { command: "a\u0000b\ud800", workdir: "/w" }))).toEqual({
      command: "a\ufffdb\ufffd",
      workdir: "/w",
    });
    expect(toolCallTarget(call("write_file", { path: "/f", content: "secret" }))).toEqual({
      path: "/f",
    });
    expect(
      toolCallTarget(call("edit_files", { files: [{ path: "/a", edits: [] }, { path: 3 }, null] })),
    ).toEqual({ paths: ["/a"] });
    expect(toolCallTarget(call("process_signal", { process_id: "p", signal: "kill" }))).toEqual({
      process_id: "p",
      signal: "kill",
    });
    const long = toolCallTarget(call("execute", { command: "x".repeat(AUDIT_TEXT_MAX_CHARS + 5) }));
    expect(long.command).toHaveLength(AUDIT_TEXT_MAX_CHARS + 1);
    expect(toolCallTarget(call("unknown_tool", "not an object"))).toEqual({});
  });
});
