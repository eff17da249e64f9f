import { describe, expect, it } from "vitest";
import type { ToolResult } from "./results.ts";
import { DEFAULT_TOOL_RESULT_BUDGET_BYTES, truncateToolResult } from "./truncate.ts";

const size = (r: unknown) => Buffer.byteLength(JSON.stringify(r));

describe("truncateToolResult", () => {
  it("leaves a result that fits untouched", () => {
    const r: ToolResult = { status: "completed", exit_code: 0, output: "ok", wall_duration_ms: 1 };
    expect(truncateToolResult(r, 1_000)).toBe(r);
    expect(DEFAULT_TOOL_RESULT_BUDGET_BYTES).toBeGreaterThan(1_000);
  });

  it("keeps the head two thirds and the tail one third with a marker", () => {
    const output = "H".repeat(6_000) + "M".repeat(6_000) + "T".repeat(6_000);
    const r: ToolResult = { status: "completed", exit_code: 0, output, wall_duration_ms: 5 };
    const cut = truncateToolResult(r, 3_000);
    expect(size(cut)).toBeLessThanOrEqual(3_000);
    expect(size(cut)).toBeGreaterThan(2_900);
    if (cut.status !== "completed" || !("output" in cut)) throw new Error("shape");
    const m = /^(H*)\n\n\.\.\. \[(\d+) bytes cut\] \.\.\.\n\n(T*)$/.exec(cut.output);
    expect(m).not.toBeNull();
    const [, head, bytesCut, tail] = m!;
    expect(head!.length + Number(bytesCut) + tail!.length).toBe(output.length);
    expect(Math.abs(head!.length - 2 * tail!.length)).toBeLessThanOrEqual(2);
    expect(cut).toMatchObject({ exit_code: 0, wall_duration_ms: 5 });
    expect(r.output).toBe(output); // the input is not changed
  });

  it("cuts the largest string even inside arrays and never splits a character", () => {
    const diff = "é".repeat(5_000);
    const r: ToolResult = { status: "applied", files: [{ path: "/a", diff }] };
    const cut = truncateToolResult(r, 2_000);
    expect(size(cut)).toBeLessThanOrEqual(2_000);
    if (cut.status !== "applied" || !("files" in cut)) throw new Error("shape");
    const text = cut.files![0]!.diff;
    expect(text).toContain("bytes cut");
    expect(text).not.toContain("\uFFFD");
    expect(cut.files![0]!.path).toBe("/a");
  });

  it("accounts for json escapes", () => {
    const output = "\u0001".repeat(10_000); // 6 bytes each in JSON
    const r: ToolResult = { status: "completed", exit_code: 0, output, wall_duration_ms: 0 };
    expect(size(truncateToolResult(r, 4_000))).toBeLessThanOrEqual(4_000);
  });
});
