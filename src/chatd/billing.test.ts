import { describe, expect, it } from "vitest";
import { unionMs } from "./billing.ts";

describe("tool batch billing", () => {
  it("overlapping calls count once", () => {
    expect(
      unionMs([
        { start: 0, end: 100 },
        { start: 50, end: 150 },
      ]),
    ).toBe(150);
  });
  it("touching intervals merge", () => {
    expect(
      unionMs([
        { start: 0, end: 10_000 },
        { start: 10_000, end: 25_000 },
      ]),
    ).toBe(25_000);
  });
  it("a serial call bills from its own start, not the batch's", () => {
    // The second call started 30 s into the batch: 10 s + 10 s, not 40 s.
    expect(
      unionMs([
        { start: 0, end: 10_000 },
        { start: 30_000, end: 40_000 },
      ]),
    ).toBe(20_000);
  });
  it("gaps between serial calls are free", () => {
    expect(
      unionMs([
        { start: 0, end: 100 },
        { start: 300, end: 350 },
      ]),
    ).toBe(150);
  });
  it("a call inside another adds nothing, in any order", () => {
    expect(
      unionMs([
        { start: 10, end: 20 },
        { start: 0, end: 100 },
        { start: 100, end: 110 },
      ]),
    ).toBe(110);
  });
  it("no intervals, or empty ones, bill nothing", () => {
    expect(unionMs([])).toBe(0);
    expect(
      unionMs([
        { start: 5, end: 5 },
        { start: 9, end: 3 },
      ]),
    ).toBe(0);
  });
});
