import { describe, expect, it } from "vitest";
import type { MessagePart } from "../messages.ts";
import {
  replacedNote,
  storableJson,
  storableParts,
  storableText,
  storableValue,
} from "./storable.ts";

describe("storable text", () => {
  it("NUL and unpaired surrogates become U+FFFD; a well-formed pair is kept", () => {
    const { value, replaced } = storableValue("a\u0000b\ud800c\udfffd\ud83d\ude00e\udbff");
    expect(value).toBe("a\ufffdb\ufffdc\ufffdd\ud83d\ude00e\ufffd");
    expect(replaced).toEqual({ nul: 1, surrogates: 3 });
  });

  it("object keys and nested values are cleaned; untouched values are the same object", () => {
    const clean = { a: ["x", { b: 1 }], c: null };
    expect(storableValue(clean).value).toBe(clean);
    const { value, replaced } = storableValue({ "k\u0000": ["x\u0000", { y: "\ud800" }], n: 2 });
    expect(value).toEqual({ "k\ufffd": ["x\ufffd", { y: "\ufffd" }], n: 2 });
    expect(replaced).toEqual({ nul: 2, surrogates: 1 });
  });

  it("a tool result that needed it says so in its note, after the note it had", () => {
    const parts: MessagePart[] = [
      {
        type: "tool-result",
        tool_call_id: "c",
        tool_name: "execute",
        is_error: false,
        result: { status: "timed_out", output: "\u0000\u0000\u0000", note: "Still running." },
      },
      {
        type: "tool-result",
        tool_call_id: "d",
        tool_name: "read_file",
        is_error: false,
        result: { status: "completed", content: "x\ud800" },
      },
      { type: "text", text: "t\u0000" },
    ];
    const out = storableParts(parts);
    expect(out[0]).toMatchObject({
      result: {
        output: "\ufffd\ufffd\ufffd",
        note:
          "Still running. 3 NUL bytes were replaced with U+FFFD (the database cannot store " +
          "them); the rest is as the workspace gave it.",
      },
    });
    expect((out[1] as { result: { note: string } }).result.note).toMatch(
      /^1 unpaired UTF-16 surrogate was replaced with U\+FFFD/,
    );
    expect(out[2]).toEqual({ type: "text", text: "t\ufffd" });
    // A result with nothing to replace is left as it is.
    const plain = storableParts(
      [parts[1]!].map((p) => ({ ...p, result: { status: "completed" } })),
    );
    expect(plain[0]).not.toHaveProperty("result.note");
  });

  it("the JSON a jsonb column gets holds no \\u0000 and no lone \\udXXX escape", () => {
    const json = storableJson({ message: "x\u0000\udc00" });
    expect(json).not.toMatch(/\\u0000|\\ud[89a-f]/i);
    expect(JSON.parse(json)).toEqual({ message: "x\ufffd\ufffd" });
    expect(storableText("ti\u0000tle")).toBe("ti\ufffdtle");
  });

  it("the note names both kinds when both were replaced", () => {
    expect(replacedNote({ nul: 2, surrogates: 1 })).toMatch(
      /^2 NUL bytes and 1 unpaired UTF-16 surrogate were replaced/,
    );
    expect(replacedNote({ nul: 0, surrogates: 0 })).toBeUndefined();
  });
});
