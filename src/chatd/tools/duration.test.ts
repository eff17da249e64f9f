import { describe, expect, it } from "vitest";
import { MAX_DURATION_MS, formatDuration, parseDuration } from "./duration.ts";

describe("parseDuration", () => {
  it("parses units and combinations largest first", () => {
    const cases: [string, number][] = [
      ["0s", 0],
      ["10s", 10_000],
      ["250ms", 250],
      ["2m", 120_000],
      ["1h30m", 5_400_000],
      ["1h2m3s4ms", 3_723_004],
      ["1.5s", 1_500],
      [" 30s ", 30_000],
      ["24h", MAX_DURATION_MS],
    ];
    for (const [text, ms] of cases) expect(parseDuration(text), text).toEqual({ ok: true, ms });
  });

  it("refuses what is not a duration with a message the model can act on", () => {
    const cases: [string, string][] = [
      ["", "empty"],
      ["10", "no unit"],
      ["ten seconds", "unexpected"],
      ["-5s", "unexpected"],
      ["30s2m", "largest to smallest"],
      ["1s1s", "largest to smallest"],
      ["10d", "unexpected"],
      ["25h", "maximum"],
    ];
    for (const [text, why] of cases) {
      const parsed = parseDuration(text);
      expect(parsed.ok, text).toBe(false);
      if (!parsed.ok) {
        expect(parsed.message).toContain(why);
        expect(parsed.message).toContain('"30s"');
      }
    }
  });

  it("formats for notes", () => {
    expect(formatDuration(250)).toBe("250ms");
    expect(formatDuration(10_000)).toBe("10s");
    expect(formatDuration(5_400_000)).toBe("1h30m");
    expect(formatDuration(1_500)).toBe("1s500ms");
  });
});
