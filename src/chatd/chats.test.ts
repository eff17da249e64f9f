import { describe, expect, it } from "vitest";
import { titleOf } from "./chats.ts";

describe("titleOf", () => {
  it("is the first non-empty line, trimmed", () => {
    expect(titleOf("\n  \n  fix the build  \nand then the tests")).toBe("fix the build");
    expect(titleOf("")).toBe("");
    expect(titleOf(" \n ")).toBe("");
  });

  it("leaves out a leading Markdown heading, quote or list marker", () => {
    expect(titleOf("## Fix the build")).toBe("Fix the build");
    expect(titleOf("> why does it fail?")).toBe("why does it fail?");
    expect(titleOf("- run the tests")).toBe("run the tests");
    expect(titleOf("#")).toBe("#");
    expect(titleOf("$ ls -la")).toBe("$ ls -la");
  });

  it("cuts a long line at a word near 50 characters, or at 50 when the words are long", () => {
    const long = `${"word ".repeat(30)}end`;
    const t = titleOf(long);
    expect(t.endsWith("…")).toBe(true);
    expect(t.length).toBeLessThanOrEqual(51);
    expect(long.startsWith(t.slice(0, -1))).toBe(true);
    expect(t.slice(0, -1).endsWith("word")).toBe(true);
    expect(titleOf("x".repeat(200))).toBe(`${"x".repeat(50)}…`);
    expect(titleOf("y".repeat(50))).toBe("y".repeat(50));
  });
});
