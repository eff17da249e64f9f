import { describe, expect, it } from "vitest";
import { parseArray, parseTimestamp, toParam } from "./values.ts";

describe("values", () => {
  it("timestamps keep their offset, years below 100, BC and infinity", () => {
    expect(parseTimestamp("2024-02-29 23:59:59.999999+05:30")).toEqual(
      new Date("2024-02-29T18:29:59.999Z"),
    );
    expect(parseTimestamp("2024-01-01 00:00:00-00:00:30").toISOString()).toBe(
      "2024-01-01T00:00:30.000Z",
    );
    expect(parseTimestamp("0050-06-01 00:00:00+00").getUTCFullYear()).toBe(50);
    expect(parseTimestamp("0001-01-01 00:00:00+00 BC").getUTCFullYear()).toBe(0);
    expect(parseTimestamp("infinity").getTime()).toBe(8.64e15);
    expect(parseTimestamp("-infinity").getTime()).toBe(-8.64e15);
    expect(() => parseTimestamp("01/02/2024")).toThrow(/DateStyle must be ISO/);
  });

  it("array literals: quotes, escapes, NULL, nesting, empty; malformed ones are refused", () => {
    expect(parseArray('{a,"b,c","d\\"e",NULL,"NULL"}', (s) => s)).toEqual([
      "a",
      "b,c",
      'd"e',
      null,
      "NULL",
    ]);
    expect(parseArray("{{1,2},{3,4}}", Number)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(parseArray("{}", Number)).toEqual([]);
    expect(parseArray("[0:1]={5,6}", Number)).toEqual([5, 6]);
    expect(() => parseArray('{"open', (s) => s)).toThrow(/malformed array literal/);
  });

  it("array parameters are Postgres array literals that round-trip through parseArray", () => {
    const value = ['a"b', "c\\d", null, "e,f", ""];
    expect(parseArray(String(toParam(value)), (s) => s)).toEqual(value);
    expect(
      toParam([
        [1, 2],
        [3, null],
      ]),
    ).toBe('{{"1","2"},{"3",NULL}}');
  });

  it("parameters that cannot be sent fail with a message saying what to pass", () => {
    expect(() => toParam(new Date(Number.NaN))).toThrow(/invalid Date/);
    expect(() => toParam(() => 1)).toThrow(/A function cannot be a query parameter/);
    expect(toParam({ big: 1n })).toBe('{"big":"1"}');
  });
});
