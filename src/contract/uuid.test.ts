import { v5 } from "uuid";
import { describe, expect, it } from "vitest";
import { parseChatId, toMessageId } from "./ids.ts";
import { TOOL_CALL_UUID_NAMESPACE, toolCallUuid } from "./uuid.ts";

describe("tool call UUID", () => {
  it("namespace is the UUIDv5 of the URL namespace and the contract URL", () => {
    expect(v5("https://coder.com/workspace-agent/tool-call", v5.URL)).toBe(
      TOOL_CALL_UUID_NAMESPACE,
    );
  });

  it("matches the contract vector", () => {
    const chat = parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")!;
    expect(toolCallUuid(chat, toMessageId(42)!, "toolu_01/%x y")).toBe(
      "1a9cb501-66b5-51bd-a7c6-1bf0e500b268",
    );
  });

  it("is the same for an upper-case chat ID and for the ID given as bytes", () => {
    const upper = parseChatId("AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE")!;
    expect(toolCallUuid(upper, toMessageId("42")!, Buffer.from("toolu_01/%x y"))).toBe(
      "1a9cb501-66b5-51bd-a7c6-1bf0e500b268",
    );
  });

  it("differs when any of chat, message or provider ID differs", () => {
    const chat = parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")!;
    const base = toolCallUuid(chat, toMessageId(42)!, "a");
    expect(toolCallUuid(chat, toMessageId(43)!, "a")).not.toBe(base);
    expect(toolCallUuid(chat, toMessageId(42)!, "b")).not.toBe(base);
    const other = parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeef")!;
    expect(toolCallUuid(other, toMessageId(42)!, "a")).not.toBe(base);
  });
});
