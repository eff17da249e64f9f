// Tool call headers for tests, built with the contract's own encoder.

import { randomUUID } from "node:crypto";
import {
  parseChatId,
  toMessageId,
  toolCallRequestHeaders,
  toolCallUuid,
  type ChatId,
  type ToolCall,
} from "../../src/contract/index.ts";

export function newChat(): ChatId {
  return parseChatId(randomUUID())!;
}

export interface TestToolCall {
  chatId: ChatId;
  message: number;
  id: string;
  ageMs?: number;
}

export function tcHeaders(tc: TestToolCall): Record<string, string> {
  return toolCallRequestHeaders(tc.chatId, {
    messageId: toMessageId(tc.message)!,
    toolCallId: tc.id,
    ageMs: tc.ageMs ?? 0,
  });
}

export function tcUuid(tc: TestToolCall): string {
  return toolCallUuid(tc.chatId, toMessageId(tc.message)!, tc.id);
}

/** The client's form of a test tool call. */
export function tcToolCall(tc: TestToolCall): ToolCall {
  return {
    chatId: tc.chatId,
    messageId: toMessageId(tc.message)!,
    toolCallId: tc.id,
    ageMs: tc.ageMs ?? 0,
  };
}
