// The tool call UUID (CONTRACT.md 3): both sides derive it from the tool call, so chatd can
// address the process a call started even when it never received the start answer.

import { createHash } from "node:crypto";
import type { ChatId, MessageId, ToolCallUuid } from "./ids.ts";

/** UUIDv5 of the URL namespace and `https://coder.com/workspace-agent/tool-call`. */
export const TOOL_CALL_UUID_NAMESPACE = "c5773f4c-0b3f-57bc-9147-36daf7921a1b";
const NAMESPACE_BYTES = Buffer.from(TOOL_CALL_UUID_NAMESPACE.replaceAll("-", ""), "hex");

/**
 * Name bytes: the 16 raw bytes of the chat UUID, the message ID as 8 bytes big-endian, then
 * the raw bytes of the (unescaped) provider tool call ID. No separators, no length prefixes.
 */
export function toolCallUuid(
  chatId: ChatId,
  messageId: MessageId,
  providerToolCallId: string | Uint8Array,
): ToolCallUuid {
  const idBytes =
    typeof providerToolCallId === "string"
      ? Buffer.from(providerToolCallId, "utf8")
      : providerToolCallId;
  const name = Buffer.alloc(24 + idBytes.length);
  name.write(chatId.replaceAll("-", ""), 0, 16, "hex");
  name.writeBigUInt64BE(messageId, 16);
  name.set(idBytes, 24);
  // UUIDv5 (RFC 9562): SHA-1 of namespace and name, version 5, RFC variant.
  const hash = createHash("sha1").update(NAMESPACE_BYTES).update(name).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.toString("hex", 0, 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` as ToolCallUuid;
}
