// Transitions (CHATD.md 3), the mechanism both sides share: every change of a chat's execution
// state is one transaction that locks the chat row, bumps snapshot_version first, then writes;
// a message insert moves history_version and resets generation_attempt; a notification goes out
// on commit (pg_notify is delivered only if the commit happens). The API's transitions are in
// api.ts, the worker's (fenced on ownership) in worker.ts.

import { ChatNotFoundError, rowToChat, type Chat } from "../chats.ts";
import type { Database, Queryable } from "../db/index.ts";
import {
  rowToMessage,
  unresolvedToolCalls,
  type ChatMessage,
  type MessagePart,
  type NewMessage,
} from "../messages.ts";
import { CHAT_CHANNEL, changePayloadSql } from "./change.ts";
import type { Acquired } from "./claim.ts";
import { insertMessagesSql, messageRecord } from "./message-rows.ts";

/**
 * Sends the chat's change notification (delivered when the transaction commits); answers the
 * chat row it was built from.
 */
export async function notifyChange(tx: Queryable, chatId: string): Promise<Chat> {
  const r = await tx.query(
    `SELECT pg_notify($1, ${changePayloadSql("chats")}), chats.* FROM chats WHERE id = $2`,
    [CHAT_CHANNEL, chatId],
  );
  if (r.rows.length === 0) throw new ChatNotFoundError(chatId);
  return rowToChat(r.rows[0]!);
}

/**
 * A transition's view: the locked chat (as of the bump: `chat.snapshotVersion` is `version`)
 * and the snapshot version it now writes at.
 */
export interface Locked {
  tx: Queryable;
  chat: Chat;
  version: string;
  /** The history since the boundary, when the caller has it (a new chat's is empty). */
  history?: ChatMessage[];
  /** When set, insertMessages appends what it inserts (a transition that publishes them). */
  inserted?: ChatMessage[];
  /** Set by startTurn: the transition makes the chat runnable. */
  started?: boolean;
}

/**
 * How this replica's worker runs a chat whose turn a transition of this replica starts: it claims
 * the chat in the transition's own transaction (transitions/claim.ts `claimIn`, whose
 * notification is the transition's) and starts its runner once that commits, rather than every
 * replica learning of a runnable chat and racing to claim it in statements of their own.
 */
export interface LocalClaim {
  /** The claiming worker: a chat created running is created as its (claim.ts claimCreatedSql). */
  readonly workerId: string;
  /** In the transaction: claims the chat if it can; answers its row when it did. */
  claim(tx: Queryable, chatId: string): Promise<Chat | undefined>;
  /** A chat its transaction claimed as it created it: its runner starts from `acquired`. */
  created(acquired: Acquired): void;
  /** Once that transaction committed: the claimed chat's runner starts (none: nothing). */
  committed(): void;
}

/**
 * A transition's last statement: the claim of a chat it started, when `claim` is given and can
 * take it; else the change notification. Answers the chat's row.
 */
export async function notifyOrClaim(l: Locked, claim: LocalClaim | undefined): Promise<Chat> {
  const claimed = l.started && claim ? await claim.claim(l.tx, l.chat.id) : undefined;
  return claimed ?? notifyChange(l.tx, l.chat.id);
}

export async function transition<T>(
  db: Database,
  chatId: string,
  fn: (l: Locked) => Promise<T>,
  /** Runs a turn this transition starts on this replica (claimed with it, run once committed). */
  claim?: LocalClaim,
): Promise<T> {
  const result = await db.transaction(async (tx) => {
    // The bump locks the row (as FOR UPDATE would, against every other transition and the
    // runner's FOR SHARE read) and answers it, in one round trip.
    const bumped = await tx.query(
      "UPDATE chats SET snapshot_version = snapshot_version + 1, updated_at = now() WHERE id = $1 RETURNING *",
      [chatId],
    );
    if (bumped.rows.length === 0) throw new ChatNotFoundError(chatId);
    const chat = rowToChat(bumped.rows[0]!);
    const l: Locked = { tx, chat, version: chat.snapshotVersion };
    const result = await fn(l);
    await notifyOrClaim(l, claim);
    return result;
  });
  claim?.committed();
  return result;
}

/**
 * Inserts the messages and moves the chat's history to `l.version`, in one statement; `set`
 * adds assignments to that update of the chat row (a row is updated once per statement).
 */
export async function insertMessages(
  l: Locked,
  messages: NewMessage[],
  set = "",
): Promise<ChatMessage[]> {
  if (messages.length === 0) return [];
  const r = await l.tx.query(
    // History moved: the task that was failing (if any) is done, and so is its retry state.
    `WITH m AS (${insertMessagesSql({ chatId: "$1::uuid", records: "$2" })} RETURNING *),
       c AS (UPDATE chats SET history_version = $3, generation_attempt = 0, retry_state = NULL${set}
             WHERE id = $1)
     SELECT * FROM m`,
    [l.chat.id, JSON.stringify(messages.map(messageRecord)), l.version],
  );
  // RETURNING keeps no order: the IDs do (they increase in the records' order).
  const inserted = r.rows.map(rowToMessage).sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  l.inserted?.push(...inserted);
  return inserted;
}

/** The chat's history as the model and the worker see it (deleted messages left out). */
export async function loadHistory(q: Queryable, chatId: string): Promise<ChatMessage[]> {
  const r = await q.query(
    "SELECT * FROM chat_messages WHERE chat_id = $1 AND NOT deleted ORDER BY id",
    [chatId],
  );
  return r.rows.map(rowToMessage);
}

/**
 * What a task needs of the history: the messages from the latest compaction boundary on (all
 * of them before the first compaction). The boundary's partial index finds it without reading
 * what came before, so a step's read does not grow with the chat's length once it compacts.
 */
export async function loadModelHistory(q: Queryable, chatId: string): Promise<ChatMessage[]> {
  const r = await q.query(
    `SELECT * FROM chat_messages WHERE chat_id = $1 AND NOT deleted
       AND id >= COALESCE((SELECT max(id) FROM chat_messages
                           WHERE chat_id = $1 AND boundary AND NOT deleted), 0)
     ORDER BY id`,
    [chatId],
  );
  return r.rows.map(rowToMessage);
}

export async function loadChat(q: Queryable, chatId: string): Promise<Chat | undefined> {
  const r = await q.query("SELECT * FROM chats WHERE id = $1", [chatId]);
  return r.rows[0] ? rowToChat(r.rows[0]) : undefined;
}

/**
 * C7: before a user message goes in, every tool call of the latest assistant message that
 * has no result gets one, so history never holds a call without exactly one result. These
 * calls were committed but their turn ended (an error, a lost task) before a result was: the
 * honest answer is that their outcome is unknown.
 */
export async function answerOutstanding(
  l: Locked,
  why: "turn_ended" | "interrupted" = "turn_ended",
): Promise<void> {
  const open = unresolvedToolCalls(l.history ?? (await loadModelHistory(l.tx, l.chat.id)));
  if (!open) return;
  await insertMessages(
    l,
    open.calls.map((c) => ({
      role: "tool",
      visibility: "both",
      content: [
        {
          type: "tool-result",
          tool_call_id: c.toolCallId,
          tool_name: c.toolName,
          is_error: false,
          result: {
            status: "unknown",
            reason: why,
            note:
              why === "interrupted"
                ? "The user interrupted the turn before this call's result was recorded; it may or may not have run. Check its effects before repeating it."
                : "The turn ended before this call's result was recorded; it may or may not have run. Check its effects before repeating it.",
          },
        },
      ],
    })),
  );
}

/** A user message to put in history, or an edit of `editOf`. */
export interface UserInput {
  content: MessagePart[];
  createdBy: string | null;
  editOf?: string | null;
}

/**
 * Puts a user message into history and runs the chat. Outstanding calls get a result first
 * (C7); an edit then discards the replaced message and everything after it.
 */
export async function startTurn(l: Locked, input: UserInput): Promise<ChatMessage> {
  l.started = true;
  await answerOutstanding(l);
  let revision = 0;
  if (input.editOf) {
    const replaced = await l.tx.query<{ id: string; revision: number }>(
      "UPDATE chat_messages SET deleted = true WHERE chat_id = $1 AND id >= $2 AND NOT deleted RETURNING id, revision",
      [l.chat.id, input.editOf],
    );
    const old = replaced.rows.find((m) => m.id === input.editOf);
    revision = (old?.revision ?? 0) + 1;
  }
  // A chat that runs again is not archived (no worker acquires an archived chat).
  const [m] = await insertMessages(
    l,
    [
      {
        role: "user",
        visibility: "both",
        content: input.content,
        createdBy: input.createdBy,
        revision,
      },
    ],
    ", status = 'running', last_error = NULL, archived = false",
  );
  return m!;
}
