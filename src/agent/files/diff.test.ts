import { describe, expect, it } from "vitest";
import { unifiedDiff } from "./diff.ts";

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}\n`).join("");

describe("unified diff", () => {
  it("equal texts have no diff", () => {
    expect(unifiedDiff("/f", "a\n", "a\n")).toBe("");
  });

  it("a change shows three lines of context", () => {
    const before = numbered(10);
    const after = before.replace("line 5\n", "five\n");
    expect(unifiedDiff("/f", before, after)).toBe(
      "--- /f\n+++ /f\n@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n line 6\n line 7\n line 8\n",
    );
  });

  it("distant changes are separate hunks and close ones merge", () => {
    const before = numbered(30);
    const far = before.replace("line 3\n", "x\n").replace("line 20\n", "y\n");
    expect(unifiedDiff("/f", before, far).match(/^@@/gm)).toHaveLength(2);
    const near = before.replace("line 3\n", "x\n").replace("line 9\n", "y\n");
    expect(unifiedDiff("/f", before, near).match(/^@@/gm)).toHaveLength(1);
  });

  it("insertion into an empty file starts at line zero", () => {
    expect(unifiedDiff("/f", "", "a\n")).toBe("--- /f\n+++ /f\n@@ -0,0 +1,1 @@\n+a\n");
  });

  it("a missing final newline is marked", () => {
    expect(unifiedDiff("/f", "a\nb", "a\nb\n")).toBe(
      "--- /f\n+++ /f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
    );
  });

  it("insertions and deletions are aligned", () => {
    expect(unifiedDiff("/f", "a\nb\nc\nd\n", "a\nc\nX\nd\n")).toBe(
      "--- /f\n+++ /f\n@@ -1,4 +1,4 @@\n a\n-b\n c\n+X\n d\n",
    );
  });
});
