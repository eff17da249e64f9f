import { describe, expect, it } from "vitest";
import { applyEdit } from "./match.ts";

describe("edit matching", () => {
  it("exact pass wins over the line passes", () => {
    expect(applyEdit("ab  \nab\n", { old_text: "ab\n", new_text: "X\n" })).toEqual({
      status: "applied",
      text: "ab  \nX\n",
      pass: "exact",
    });
  });

  it("overlapping exact matches are ambiguous", () => {
    expect(applyEdit("aaa", { old_text: "aa", new_text: "b" })).toEqual({
      status: "ambiguous",
      pass: "exact",
      matches: 2,
    });
  });

  it("replacement text is literal even with dollar signs", () => {
    const outcome = applyEdit("price", { old_text: "price", new_text: "$& $1 $$" });
    expect(outcome).toMatchObject({ status: "applied", text: "$& $1 $$" });
  });

  it("line passes match whole lines only", () => {
    // Not exact (the space), and "foo" and "bar" are parts of lines, not whole lines.
    expect(applyEdit("xfoo\nbarx\n", { old_text: "foo \nbar", new_text: "z" })).toEqual({
      status: "not_found",
    });
  });

  it("ambiguity in a line pass names that pass", () => {
    expect(applyEdit("  a\n b\n\ta \nb \n", { old_text: "a\nb", new_text: "c" })).toEqual({
      status: "ambiguous",
      pass: "surrounding_whitespace",
      matches: 2,
    });
  });

  it("replace all works in line passes", () => {
    const outcome = applyEdit("a \nb\na  \nb\n", {
      old_text: "a\nb",
      new_text: "c",
      replace_all: true,
    });
    expect(outcome).toMatchObject({ status: "applied", text: "c\nc\n" });
  });

  it("line replacement keeps a missing final newline", () => {
    const outcome = applyEdit("x\ny  ", { old_text: "y\n", new_text: "z\n" });
    expect(outcome).toMatchObject({ status: "applied", text: "x\nz", pass: "trailing_whitespace" });
  });

  it("empty new text deletes the matched lines", () => {
    const outcome = applyEdit("a\n  b\nc\n", { old_text: "b \n", new_text: "" });
    expect(outcome).toMatchObject({ status: "applied", text: "a\nc\n" });
  });

  it("blank only old text never matches loosely", () => {
    expect(applyEdit("a\n\nb\n", { old_text: " \n", new_text: "x" })).toEqual({
      status: "not_found",
    });
  });
});
