// A worker's fenced transition as one statement (CHATD.md 3): the UPDATE that bumps
// snapshot_version locks the chat row and checks the fence in its WHERE; the messages go in
// from the locked row (so their IDs still increase within the chat); more writes ride along as
// CTEs. A statement is its own transaction: atomic, one round trip, and nothing written when the
// fence fails. It sends no notification: only the owner writes it, and the owner tells whoever
// follows the chat once it committed (message-feed.ts: this replica's streams, and through them
// the relays of other replicas' streams), so no replica's listening connection wakes for it.
// transition() (core.ts) stays for the transitions that decide in TypeScript under the lock
// (finishing a turn, an interruption, the API's), and notifies.

import {
  ChatNotFoundError,
  checkFence,
  FenceError,
  rowToChat,
  type Chat,
  type Fence,
} from "../chats.ts";
import type { Queryable } from "../db/index.ts";
import type { ChatMessage, NewMessage } from "../messages.ts";
import { loadChat } from "./core.ts";
import { committedMessage, insertMessagesSql, messageRecord } from "./message-rows.ts";

export interface FencedChange {
  /** Messages to insert: history moves (history_version, generation_attempt 0, no retry state). */
  messages?: NewMessage[];
  /** More of the chat row to set (SQL of `chats`' columns; parameters `$8` on, from `params`). */
  set?: string;
  /** More statements, as CTEs that may read `c` (the chat's new row): `name AS (...)`. */
  ctes?: string[];
  /**
   * A further condition on the chat row (SQL over `chats`) beside the fence: when it fails,
   * nothing is written and fencedWriteIf answers undefined.
   */
  where?: string;
  /**
   * The next action calls the model: its attempt is recorded here (generation_attempt is the
   * attempt it makes: 1 once history moved), so that call writes nothing first (HeldChat).
   */
  nextAttempt?: boolean;
  /** What the statement answers besides the chat's row: `expression AS name, …` (Written.also). */
  answer?: string;
  params?: readonly unknown[];
  /** Writes of other concerns riding along, each naming its own parameters (ChangePart). */
  parts?: readonly ChangePart[];
}

/**
 * A write that rides along on a fenced write (a kept context snapshot, a tool batch's start):
 * CTEs that may read `c` and `m` (the chat's new row, the messages inserted) and what it
 * answers, with its parameters named through `p(value)`, which answers the placeholder.
 */
export type ChangePart = (p: (value: unknown) => string) => { ctes: string[]; answer?: string };

export interface Written {
  /** The chat's row as the statement left it. */
  chat: Chat;
  /** The messages inserted, in order. */
  messages: ChatMessage[];
  /** The statement's whole answer row (FencedChange.answer's columns among it). */
  also: Record<string, unknown>;
}

/** Writes `change` if the chat still matches `fence`; throws FenceError (or not found) if not. */
export async function fencedWrite(
  q: Queryable,
  fence: Fence,
  change: FencedChange = {},
): Promise<Written> {
  const w = await fencedWriteIf(q, fence, change);
  if (!w) throw new FenceError(`Stale task for chat ${fence.chatId}: the chat changed.`);
  return w;
}

/** fencedWrite, and undefined when the fence holds but `change.where` does not. */
export async function fencedWriteIf(
  q: Queryable,
  fence: Fence,
  change: FencedChange,
): Promise<Written | undefined> {
  const messages = change.messages ?? [];
  const records = messages.map(messageRecord);
  const sets = [
    "snapshot_version = snapshot_version + 1",
    "updated_at = now()",
    ...(messages.length > 0
      ? [
          "history_version = snapshot_version + 1",
          `generation_attempt = ${change.nextAttempt ? 1 : 0}`,
          "retry_state = NULL",
        ]
      : change.nextAttempt
        ? ["generation_attempt = generation_attempt + 1"]
        : []),
    ...(change.set ? [change.set] : []),
  ];
  const params: unknown[] = [
    fence.chatId,
    fence.workerId,
    fence.runnerId,
    fence.status,
    fence.historyVersion,
    fence.generationAttempt ?? null,
    JSON.stringify(records),
    ...(change.params ?? []),
  ];
  const p = (value: unknown): string => `$${params.push(value)}`;
  const parts = (change.parts ?? []).map((part) => part(p));
  const answers = [change.answer, ...parts.map((x) => x.answer)].filter((a) => a !== undefined);
  const ctes = [
    `c AS (UPDATE chats SET ${sets.join(", ")}
       WHERE id = $1 AND worker_id::text = $2 AND runner_id::text = $3 AND status = $4
         AND history_version = $5
         AND ($6::int IS NULL OR generation_attempt = $6::int)${change.where ? ` AND (${change.where})` : ""}
       RETURNING *)`,
    `m AS (${insertMessagesSql({ chatId: "c.id", records: "$7", from: "c" })}
       RETURNING id, created_at)`,
    ...(change.ctes ?? []),
    ...parts.flatMap((x) => x.ctes),
  ];
  const r = await q.query(
    `WITH ${ctes.join(",\n")}
     SELECT c.*, (SELECT array_agg(id::text ORDER BY id) FROM m) AS message_ids,
       (SELECT array_agg(created_at ORDER BY id) FROM m) AS message_times
       ${answers.map((a) => `, ${a}`).join("")}
     FROM c`,
    params,
  );
  const row = r.rows[0];
  if (!row) {
    // Nothing written: say why, as a transition's checkFence under the lock would have.
    const chat = await loadChat(q, fence.chatId);
    if (!chat) throw new ChatNotFoundError(fence.chatId);
    checkFence(chat, fence);
    if (change.where) return undefined;
    throw new FenceError(`Stale task for chat ${fence.chatId}: the chat changed.`);
  }
  const ids = (row.message_ids as string[] | null) ?? [];
  const times = (row.message_times as Date[] | null) ?? [];
  return {
    chat: rowToChat(row),
    messages: records.map((m, i) => committedMessage(m, fence.chatId, ids[i]!, times[i]!)),
    also: row,
  };
}
