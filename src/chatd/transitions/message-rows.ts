// How messages go into chat_messages, for every transition: each NewMessage as a record of the
// table's columns (text the database cannot store replaced), all of a transition's messages in
// one INSERT from a JSON array, typed by the table's own row type, in the array's order (the
// chat row is locked, so their IDs increase within the chat).

import { rowToMessage, type ChatMessage, type NewMessage } from "../messages.ts";
import { storableParts } from "./storable.ts";

/** The columns a message sets; each record's keys (messageRecord) are these. */
const COLUMNS = [
  "role",
  "visibility",
  "content",
  "created_by",
  "input_tokens",
  "output_tokens",
  "runtime_ms",
  "cost_micros",
  "revision",
  "prompt_tokens",
  "context_limit",
  "boundary",
];

export function messageRecord(m: NewMessage): Record<string, unknown> {
  return {
    role: m.role,
    visibility: m.visibility,
    content: storableParts(m.content),
    created_by: m.createdBy ?? null,
    input_tokens: m.inputTokens ?? 0,
    output_tokens: m.outputTokens ?? 0,
    runtime_ms: Math.round(m.runtimeMs ?? 0),
    cost_micros: m.costMicros ?? 0,
    revision: m.revision ?? 0,
    prompt_tokens: m.promptTokens ?? null,
    context_limit: m.contextLimit ?? null,
    boundary: m.boundary ?? false,
  };
}

/** The message a commit of `record` (messageRecord's) holds, with its ID and time. */
export function committedMessage(
  record: Record<string, unknown>,
  chatId: string,
  id: string,
  createdAt: Date,
): ChatMessage {
  return rowToMessage({ ...record, id, chat_id: chatId, created_at: createdAt });
}

/**
 * The INSERT of the records in the JSON array `records` (a parameter), for the chat `chatId`
 * (an SQL expression), with `from` joined in (a CTE the chat ID comes from, or nothing).
 */
export function insertMessagesSql(o: { chatId: string; records: string; from?: string }): string {
  return `INSERT INTO chat_messages (chat_id, ${COLUMNS.join(", ")})
     SELECT ${o.chatId}, ${COLUMNS.map((k) => `r.${k}`).join(", ")} FROM ${o.from ? `${o.from} CROSS JOIN ` : ""}
       jsonb_array_elements(${o.records}::jsonb) WITH ORDINALITY AS e(v, n)
       CROSS JOIN LATERAL jsonb_populate_record(NULL::chat_messages, e.v) AS r
     ORDER BY e.n`;
}
