import { describe, expect, it } from "vitest";
import { decodeToolCallError, TOOL_CALL_ERRORS, ToolCallError } from "./errors.ts";

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

describe("contract errors", () => {
  it.each(Object.keys(TOOL_CALL_ERRORS))("a 409 with JSON code %s is a contract error", (code) => {
    const err = decodeToolCallError(
      409,
      "application/json; charset=utf-8",
      json({ message: "m", code }),
    );
    expect(err).toBeInstanceOf(ToolCallError);
    expect(err?.code).toBe(code);
    expect(err?.message).toBe("m");
  });

  it("only a 409 with a JSON body and a known code is a contract error", () => {
    const body = json({ message: "m", code: "stale_tool_call" });
    expect(decodeToolCallError(400, "application/json", body)).toBeUndefined();
    expect(decodeToolCallError(409, "text/plain", body)).toBeUndefined();
    expect(decodeToolCallError(409, undefined, body)).toBeUndefined();
    expect(decodeToolCallError(409, "application/json", Buffer.from("nope"))).toBeUndefined();
    expect(
      decodeToolCallError(409, "application/json", json({ message: "m", code: "other" })),
    ).toBeUndefined();
    expect(decodeToolCallError(409, "application/json", json({ message: "m" }))).toBeUndefined();
    expect(decodeToolCallError(409, "application/json", json(["stale_tool_call"]))).toBeUndefined();
  });
});
