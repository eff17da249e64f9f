import { describe, expect, it } from "vitest";
import { titleOf } from "./chats.ts";

describe("titleOf", () => {
  it("is the first non-empty line, trimmed", () => {
    expect(titleOf("\n  \n  fix the build  \nand then the tests")).toBe("fix the build");
    expect(titleOf("")).toBe("");
    expect(titleOf(" \n ")).toBe("");
  });

  it("cuts a long line at a word near 80 characters, or at 80 when the words are long", () => {
    const long = `${"word ".repeat(30)}end`;
    const t = titleOf(long);
    expect(t.endsWith("…")).toBe(true);
    expect(t.length).toBeLessThanOrEqual(81);
    expect(long.startsWith(t.slice(0, -1))).toBe(true);
    expect(t.slice(0, -1).endsWith("word")).toBe(true);
    expect(titleOf("x".repeat(200))).toBe(`${"x".repeat(80)}…`);
    expect(titleOf("y".repeat(80))).toBe("y".repeat(80));
  });
});
