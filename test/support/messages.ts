// A chat message for unit tests: every field at its empty value, then `o`.

import type { ChatMessage } from "../../src/chatd/messages.ts";

export function testMessage(o: Partial<ChatMessage> & Pick<ChatMessage, "id">): ChatMessage {
  return {
    chatId: "chat",
    role: "assistant",
    visibility: "both",
    content: [],
    createdBy: null,
    createdAt: new Date(0),
    inputTokens: 0,
    outputTokens: 0,
    runtimeMs: 0,
    costMicros: 0,
    promptTokens: null,
    contextLimit: null,
    boundary: false,
    ...o,
  };
}
