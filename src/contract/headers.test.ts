import { describe, expect, it } from "vitest";
import {
  encodeAgeMs,
  escapeToolCallId,
  parseChatIdHeader,
  parseRunAgeHeader,
  parseToolCallHeaders,
  unescapeToolCallId,
  type DistinctHeaders,
} from "./headers.ts";

const M = "coder-tool-call-message-id";
const I = "coder-tool-call-id";
const A = "coder-tool-call-age-ms";

function h(m?: string | string[], i?: string | string[], a?: string | string[]): DistinctHeaders {
  const wrap = (v?: string | string[]) =>
    v === undefined ? undefined : Array.isArray(v) ? v : [v];
  return { [M]: wrap(m), [I]: wrap(i), [A]: wrap(a) };
}

function detail(headers: DistinctHeaders): string {
  const r = parseToolCallHeaders(headers);
  if (r.kind !== "error") throw new Error(`expected an error, got ${r.kind}`);
  return r.detail;
}

describe("Coder-Tool-Call-Id escaping", () => {
  it.each([
    ["toolu_01ABC", "toolu_01ABC"],
    ["call/1", "call%2F1"],
    ["100%x", "100%25x"],
    ["a b", "a%20b"],
    ["工具-é", "%E5%B7%A5%E5%85%B7-%C3%A9"],
    ["$&+:=@-_.~", "$&+:=@-_.~"],
    ["!*'()", "%21%2A%27%28%29"],
  ])("escapes %j as %j and back", (raw, escaped) => {
    expect(escapeToolCallId(raw)).toBe(escaped);
    expect(unescapeToolCallId(escaped)?.toString("utf8")).toBe(raw);
  });

  it("keeps + as + when decoding", () => {
    expect(unescapeToolCallId("a+b")?.toString()).toBe("a+b");
  });

  it("decodes lower-case hex", () => {
    expect(unescapeToolCallId("call%2f1")?.toString()).toBe("call/1");
  });

  it.each(["%zz", "%4", "abc%", "%G0"])("refuses the bad escape %j", (v) => {
    expect(unescapeToolCallId(v)).toBeUndefined();
  });
});

describe("age encoding", () => {
  it("truncates to whole ms and clamps negatives to 0", () => {
    expect(encodeAgeMs(2.999)).toBe("2");
    expect(encodeAgeMs(-1000)).toBe("0");
    expect(encodeAgeMs(3_600_000)).toBe("3600000");
    expect(encodeAgeMs(Number.NaN)).toBe("0");
  });
});

describe("tool call header parsing", () => {
  it("no tool call headers means no tool call", () => {
    expect(parseToolCallHeaders({}).kind).toBe("none");
    expect(parseToolCallHeaders(h()).kind).toBe("none");
  });

  it("parses a complete set, unescaping the ID to bytes", () => {
    const r = parseToolCallHeaders(h("0042", "call%2F1", "1500"));
    expect(r).toEqual({
      kind: "tool_call",
      headers: { messageId: 42n, toolCallId: Buffer.from("call/1"), ageMs: 1500 },
    });
  });

  it("a repeated header is an error, checked before completeness", () => {
    expect(detail(h(["1", "2"], undefined, undefined))).toBe(
      "invalid Coder-Tool-Call-Message-Id header: multiple values",
    );
    expect(detail(h("1", ["a", "a"], "0"))).toBe(
      "invalid Coder-Tool-Call-Id header: multiple values",
    );
    expect(detail(h("1", "a", ["0", "0"]))).toBe(
      "invalid Coder-Tool-Call-Age-Ms header: multiple values",
    );
  });

  it("a partial set names every missing header; an empty header counts as present", () => {
    expect(detail(h("1"))).toBe(
      "incomplete tool call headers: missing Coder-Tool-Call-Id, Coder-Tool-Call-Age-Ms",
    );
    expect(detail(h(undefined, "", undefined))).toBe(
      "incomplete tool call headers: missing Coder-Tool-Call-Message-Id, Coder-Tool-Call-Age-Ms",
    );
  });

  it.each(["0", "-1", "+1", " 1", "1.0", "", "9223372036854775808", "0x10"])(
    "message ID %j is refused",
    (m) => {
      expect(detail(h(m, "a", "0"))).toMatch(/^invalid Coder-Tool-Call-Message-Id header/);
    },
  );

  it("message ID 2^63-1 and leading zeros are accepted", () => {
    const r = parseToolCallHeaders(h("9223372036854775807", "a", "0"));
    expect(r.kind === "tool_call" && r.headers.messageId).toBe(9223372036854775807n);
    const z = parseToolCallHeaders(h("007", "a", "0"));
    expect(z.kind === "tool_call" && z.headers.messageId).toBe(7n);
  });

  it("an ID that fails to unescape or unescapes to empty is refused", () => {
    expect(detail(h("1", "%zz", "0"))).toMatch(/^invalid Coder-Tool-Call-Id header/);
    expect(detail(h("1", "", "0"))).toMatch(/^invalid Coder-Tool-Call-Id header/);
  });

  it("an ID's bytes other than %XX are taken literally", () => {
    const r = parseToolCallHeaders(h("1", "a b+c", "0"));
    expect(r.kind === "tool_call" && r.headers.toolCallId.toString()).toBe("a b+c");
  });

  it.each(["1.5", "", "-1", "9223372036854", "9223372036855", "1e3", " 5"])(
    "age %j is checked against the bounds",
    (age) => {
      const r = parseToolCallHeaders(h("1", "a", age));
      if (age === "9223372036854") {
        expect(r.kind === "tool_call" && r.headers.ageMs).toBe(9223372036854);
      } else {
        expect(r.kind).toBe("error");
      }
    },
  );

  it("message ID errors come before ID and age errors", () => {
    expect(detail(h("0", "%zz", "-1"))).toMatch(/Message-Id/);
    expect(detail(h("1", "%zz", "-1"))).toMatch(/Coder-Tool-Call-Id/);
  });
});

describe("Coder-Chat-Id", () => {
  it("is a chat context only in canonical form, either case, and not nil", () => {
    const chat = (v: string) => parseChatIdHeader({ "coder-chat-id": [v] });
    expect(chat("AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee")).toEqual({
      kind: "chat",
      chatId: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
    });
    expect(chat("").kind).toBe("none");
    expect(chat("00000000-0000-0000-0000-000000000000").kind).toBe("none");
    expect(chat("aaaaaaaabbbbccccddddeeeeeeeeeeee").kind).toBe("none");
    expect(chat("{aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee}").kind).toBe("none");
    expect(parseChatIdHeader({}).kind).toBe("none");
  });

  it("repeated is an error", () => {
    const id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    expect(parseChatIdHeader({ "coder-chat-id": [id, id] }).kind).toBe("error");
  });
});

describe("run age header", () => {
  it("absent, malformed, negative or repeated reads as 0", () => {
    expect(parseRunAgeHeader(undefined)).toBe(0);
    expect(parseRunAgeHeader(["abc"])).toBe(0);
    expect(parseRunAgeHeader(["-5"])).toBe(0);
    expect(parseRunAgeHeader(["5", "6"])).toBe(0);
    expect(parseRunAgeHeader(["1500"])).toBe(1500);
  });
});
