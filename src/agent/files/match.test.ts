import { describe, expect, it } from "vitest";
import { applyEdit } from "./match.ts";

describe("edit matching", () => {
  it("ExactPassWinsOverTheLinePasses", () => {
    expect(applyEdit("ab  \nab\n", { old_text: "ab\n", new_text: "X\n" })).toEqual({
      status: "applied",
      text: "ab  \nX\n",
      pass: "exact",
    });
  });

  it("OverlappingExactMatchesAreAmbiguous", () => {
    expect(applyEdit("aaa", { old_text: "aa", new_text: "b" })).toEqual({
      status: "ambiguous",
      pass: "exact",
      matches: 2,
    });
  });

  it("ReplacementTextIsLiteralEvenWithDollarSigns", () => {
    const outcome = applyEdit("price", { old_text: "price", new_text: "$& $1 $$" });
    expect(outcome).toMatchObject({ status: "applied", text: "$& $1 $$" });
  });

  it("LinePassesMatchWholeLinesOnly", () => {
    // Not exact (the space), and "foo" and "bar" are parts of lines, not whole lines.
    expect(applyEdit("xfoo\nbarx\n", { old_text: "foo \nbar", new_text: "z" })).toEqual({
      status: "not_found",
    });
  });

  it("AmbiguityInALinePassNamesThatPass", () => {
    expect(applyEdit("  a\n b\n\ta \nb \n", { old_text: "a\nb", new_text: "c" })).toEqual({
      status: "ambiguous",
      pass: "surrounding_whitespace",
      matches: 2,
    });
  });

  it("ReplaceAllWorksInLinePasses", () => {
    const outcome = applyEdit("a \nb\na  \nb\n", {
      old_text: "a\nb",
      new_text: "c",
      replace_all: true,
    });
    expect(outcome).toMatchObject({ status: "applied", text: "c\nc\n" });
  });

  it("LineReplacementKeepsAMissingFinalNewline", () => {
    const outcome = applyEdit("x\ny  ", { old_text: "y\n", new_text: "z\n" });
    expect(outcome).toMatchObject({ status: "applied", text: "x\nz", pass: "trailing_whitespace" });
  });

  it("EmptyNewTextDeletesTheMatchedLines", () => {
    const outcome = applyEdit("a\n  b\nc\n", { old_text: "b \n", new_text: "" });
    expect(outcome).toMatchObject({ status: "applied", text: "a\nc\n" });
  });

  it("BlankOnlyOldTextNeverMatchesLoosely", () => {
    expect(applyEdit("a\n\nb\n", { old_text: " \n", new_text: "x" })).toEqual({
      status: "not_found",
    });
  });
});
