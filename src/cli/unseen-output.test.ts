import { describe, expect, it } from "vitest";
import { unseenOutput } from "./unseen-output.ts";

/** Lines `from`..`to` of a command's output, each unique. */
const lines = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`).join("");
const marker = (n: number) => `\n\n... [omitted ${n} bytes] ...\n\n`;

describe("unseen output", () => {
  it("an output that grew: the growth; the same or a shorter read: nothing", () => {
    expect(unseenOutput("", "a\n")).toBe("a\n");
    expect(unseenOutput(lines(1, 3), lines(1, 5))).toBe(lines(4, 5));
    expect(unseenOutput(lines(1, 5), lines(1, 5))).toBe("");
    expect(unseenOutput(lines(1, 5), lines(1, 3))).toBe("");
  });

  it("once the agent left the middle out, what follows the last line shown", () => {
    // Shown: lines 1-900 live. Now: the head (1-300), a marker, the tail (700-1200).
    const now = lines(1, 300) + marker(4000) + lines(700, 1200);
    expect(unseenOutput(lines(1, 900), now)).toBe(lines(901, 1200));
    // And again, as the tail moves on.
    expect(unseenOutput(now, lines(1, 300) + marker(6000) + lines(900, 1500))).toBe(
      lines(1201, 1500),
    );
  });

  it("when what was shown last is gone too, the marker and the tail after the shared head", () => {
    const now = lines(1, 300) + marker(9000) + lines(2000, 2500);
    expect(unseenOutput(lines(1, 900), now)).toBe(marker(9000) + lines(2000, 2500));
  });

  it("a character cut short at the end of one read and whole in the next", () => {
    expect(unseenOutput("caf\uFFFD", "café\n")).toBe("é\n");
  });
});
