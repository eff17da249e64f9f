import { describe, expect, it } from "vitest";
import { z } from "zod";
import { TOOL_INPUTS, TOOL_NAMES, sendsToolCallHeaders, toolDeclarations } from "./declarations.ts";

describe("tool declarations", () => {
  it("declare every tool with a description and schema but no execute", () => {
    const tools = toolDeclarations();
    expect(Object.keys(tools)).toEqual([...TOOL_NAMES]);
    expect(TOOL_NAMES).toEqual([
      "execute",
      "process_output",
      "process_list",
      "process_signal",
      "read_file",
      "write_file",
      "edit_files",
    ]);
    for (const name of TOOL_NAMES) {
      const t = tools[name];
      expect(t.description?.length, name).toBeGreaterThan(20);
      expect("execute" in t && t.execute !== undefined, name).toBe(false);
      expect(() => z.toJSONSchema(TOOL_INPUTS[name], { io: "input" })).not.toThrow();
    }
  });

  it("only side effect tools send tool call headers", () => {
    const sends = TOOL_NAMES.filter((n) => sendsToolCallHeaders(n));
    expect(sends).toEqual(["execute", "write_file", "edit_files"]);
    expect(sendsToolCallHeaders("no_such_tool")).toBe(false);
  });
});
