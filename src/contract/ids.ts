// Branded identifiers of the contract, so a chat ID, a message ID and a tool call UUID
// cannot be mixed up at compile time.

declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

/** A chat UUID in lower-case canonical form, never the nil UUID. */
export type ChatId = Brand<string, "ChatId">;
/** A tool call message ID: `chat_messages.id`, an int64 > 0. */
export type MessageId = Brand<bigint, "MessageId">;
/** The UUIDv5 that names one tool call (CONTRACT.md 3). */
export type ToolCallUuid = Brand<string, "ToolCallUuid">;

const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NIL_UUID = "00000000-0000-0000-0000-000000000000";
export const MAX_INT64 = 2n ** 63n - 1n;

/** A chat context only in the canonical 8-4-4-4-12 form (either case), never the nil UUID. */
export function parseChatId(value: string): ChatId | undefined {
  if (!CANONICAL_UUID.test(value)) return undefined;
  const lower = value.toLowerCase();
  return lower === NIL_UUID ? undefined : (lower as ChatId);
}

/** A message ID from a number, bigint or decimal string; undefined unless 0 < id ≤ 2^63−1. */
export function toMessageId(value: number | bigint | string): MessageId | undefined {
  let id: bigint;
  if (typeof value === "string") {
    if (!/^[0-9]+$/.test(value)) return undefined;
    id = BigInt(value);
  } else if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) return undefined;
    id = BigInt(value);
  } else {
    id = value;
  }
  return id > 0n && id <= MAX_INT64 ? (id as MessageId) : undefined;
}
