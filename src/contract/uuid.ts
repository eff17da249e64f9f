// The tool call UUID (CONTRACT.md 3): both sides derive it from the tool call, so chatd can
// address the process a call started even when it never received the start answer.

import { hash } from "node:crypto";
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
  // UUIDv5 (RFC 9562): SHA-1 of namespace and name, version 5, RFC variant.
  const input = Buffer.alloc(16 + 24 + idBytes.length);
  NAMESPACE_BYTES.copy(input, 0);
  input.write(chatId.replaceAll("-", ""), 16, 16, "hex");
  input.writeBigUInt64BE(messageId, 32);
  input.set(idBytes, 40);
  const digest = hash("sha1", input, "buffer");
  digest[6] = (digest[6]! & 0x0f) | 0x50;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = digest.toString("hex", 0, 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` as ToolCallUuid;
}
