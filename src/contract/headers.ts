// The tool call headers (CONTRACT.md 2): encoding on the chatd side, parsing on the agent
// side. Parsing reads repeated headers distinctly (Node joins repeats with ", "), so a
// repeated header is an error instead of a silently merged value.

import { parseChatId, toMessageId, type ChatId, type MessageId } from "./ids.ts";

export const CHAT_ID_HEADER = "Coder-Chat-Id";
export const MESSAGE_ID_HEADER = "Coder-Tool-Call-Message-Id";
export const TOOL_CALL_ID_HEADER = "Coder-Tool-Call-Id";
export const AGE_HEADER = "Coder-Tool-Call-Age-Ms";
export const RUN_AGE_HEADER = "Coder-Tool-Call-Run-Age-Ms";

/** The largest age the header may carry: 2^63−1 ns in whole ms. */
export const MAX_AGE_MS = 9223372036854;

/** The three headers that identify a tool call, with their age. */
export interface ToolCallHeaders {
  messageId: MessageId;
  /** The unescaped provider tool call ID, as raw bytes (records are keyed by these). */
  toolCallId: Buffer;
  ageMs: number;
}

/** Header values by lower-case name, each repeat kept apart (`req.headersDistinct`). */
export type DistinctHeaders = Record<string, string[] | undefined>;

export type ParsedToolCallHeaders =
  | { kind: "none" }
  | { kind: "tool_call"; headers: ToolCallHeaders }
  | { kind: "error"; detail: string };

// ---- escaping (Go's url.PathEscape) --------------------------------------------------

const UNESCAPED = new Uint8Array(256);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~$&+:=@") {
  UNESCAPED[c.charCodeAt(0)] = 1;
}
const HEX = "0123456789ABCDEF";

/** Escapes a provider tool call ID for `Coder-Tool-Call-Id`. */
export function escapeToolCallId(id: string | Uint8Array): string {
  const bytes = typeof id === "string" ? Buffer.from(id, "utf8") : id;
  let out = "";
  for (const b of bytes) {
    out += UNESCAPED[b] ? String.fromCharCode(b) : "%" + HEX[b >> 4] + HEX[b & 15];
  }
  return out;
}

/**
 * The bytes of a header value. Node hands a received header's bytes over as a Latin-1 string
 * (one char per byte), so those chars are the bytes; a string with a char above U+00FF was not
 * received (a caller's own string) and stands for its UTF-8 encoding.
 */
export function headerBytes(value: string): Buffer {
  // eslint-disable-next-line no-control-regex
  return /[^\u0000-\u00ff]/.test(value) ? Buffer.from(value, "utf8") : Buffer.from(value, "latin1");
}

/**
 * Unescapes `%XX` sequences only (`+` stays `+`); undefined on a bad escape. Any other byte
 * is taken literally, so a raw `é` (bytes C3 A9) and `%C3%A9` are the same ID.
 */
export function unescapeToolCallId(value: string): Buffer | undefined {
  const input = headerBytes(value);
  const out = Buffer.alloc(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const b = input[i]!;
    if (b !== 0x25) {
      out[n++] = b;
      continue;
    }
    const hi = hexValue(input[i + 1]);
    const lo = hexValue(input[i + 2]);
    if (hi < 0 || lo < 0) return undefined;
    out[n++] = (hi << 4) | lo;
    i += 2;
  }
  return out.subarray(0, n);
}

function hexValue(b: number | undefined): number {
  if (b === undefined) return -1;
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x41 + 10;
  if (b >= 0x61 && b <= 0x66) return b - 0x61 + 10;
  return -1;
}

/** Age encoding: whole ms, truncated; negative becomes 0. */
export function encodeAgeMs(ms: number): string {
  if (!(ms > 0)) return "0";
  return String(Math.min(Math.trunc(ms), MAX_AGE_MS));
}

/** The request headers chatd sends for a tool call. */
export function toolCallRequestHeaders(
  chatId: ChatId,
  toolCall: { messageId: MessageId; toolCallId: string; ageMs: number },
): Record<string, string> {
  return {
    [CHAT_ID_HEADER]: chatId,
    [MESSAGE_ID_HEADER]: toolCall.messageId.toString(),
    [TOOL_CALL_ID_HEADER]: escapeToolCallId(toolCall.toolCallId),
    [AGE_HEADER]: encodeAgeMs(toolCall.ageMs),
  };
}

// ---- parsing ---------------------------------------------------------------------------

const TOOL_CALL_HEADERS = [MESSAGE_ID_HEADER, TOOL_CALL_ID_HEADER, AGE_HEADER] as const;

function values(headers: DistinctHeaders, name: string): string[] | undefined {
  const v = headers[name.toLowerCase()];
  return v === undefined || v.length === 0 ? undefined : v;
}

/** Parses the three tool call headers in the order CONTRACT.md 2 gives. */
export function parseToolCallHeaders(headers: DistinctHeaders): ParsedToolCallHeaders {
  const present = TOOL_CALL_HEADERS.map((name) => values(headers, name));
  for (const [i, v] of present.entries()) {
    if (v !== undefined && v.length > 1) {
      return { kind: "error", detail: `invalid ${TOOL_CALL_HEADERS[i]} header: multiple values` };
    }
  }
  const [messageValue, idValue, ageValue] = present.map((v) => v?.[0]);
  if (messageValue === undefined && idValue === undefined && ageValue === undefined) {
    return { kind: "none" };
  }
  if (messageValue === undefined || idValue === undefined || ageValue === undefined) {
    const missing = TOOL_CALL_HEADERS.filter((_, i) => present[i] === undefined);
    return { kind: "error", detail: `incomplete tool call headers: missing ${missing.join(", ")}` };
  }
  const messageId = toMessageId(messageValue);
  if (messageId === undefined) {
    return {
      kind: "error",
      detail: `invalid ${MESSAGE_ID_HEADER} header: ${JSON.stringify(messageValue)} is not a decimal integer from 1 to 9223372036854775807`,
    };
  }
  const toolCallId = unescapeToolCallId(idValue);
  if (toolCallId === undefined) {
    return { kind: "error", detail: `invalid ${TOOL_CALL_ID_HEADER} header: bad %-escape` };
  }
  if (toolCallId.length === 0) {
    return { kind: "error", detail: `invalid ${TOOL_CALL_ID_HEADER} header: empty tool call ID` };
  }
  if (!/^[0-9]+$/.test(ageValue) || BigInt(ageValue) > BigInt(MAX_AGE_MS)) {
    return {
      kind: "error",
      detail: `invalid ${AGE_HEADER} header: ${JSON.stringify(ageValue)} is not a whole number of milliseconds from 0 to ${MAX_AGE_MS}`,
    };
  }
  return { kind: "tool_call", headers: { messageId, toolCallId, ageMs: Number(ageValue) } };
}

export type ParsedChatId =
  { kind: "chat"; chatId: ChatId } | { kind: "none" } | { kind: "error"; detail: string };

/** `Coder-Chat-Id`: a chat context only in canonical form; repeated is an error. */
export function parseChatIdHeader(headers: DistinctHeaders): ParsedChatId {
  const v = values(headers, CHAT_ID_HEADER);
  if (v === undefined) return { kind: "none" };
  if (v.length > 1)
    return { kind: "error", detail: `invalid ${CHAT_ID_HEADER} header: multiple values` };
  const chatId = parseChatId(v[0]!);
  return chatId === undefined ? { kind: "none" } : { kind: "chat", chatId };
}

/** The run age a response carries; absent, malformed, negative or repeated → 0. */
export function parseRunAgeHeader(values: string[] | undefined): number {
  if (values === undefined || values.length !== 1) return 0;
  const v = values[0]!;
  if (!/^[0-9]+$/.test(v)) return 0;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : 0;
}
