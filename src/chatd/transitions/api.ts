// The API side's transitions (CHATD.md 3): create a chat, send, edit, take back a queued
// message, interrupt. Each is one transaction through core.ts's `transition`, but the creation,
// which is one statement.

import { randomUUID } from "node:crypto";
import {
  ChatRefusedError,
  MessageNotEditableError,
  rowToChat,
  titleOf,
  type Chat,
} from "../chats.ts";
import type { Database, Queryable } from "../db/index.ts";
import type { ChatMessage, MessagePart, NewMessage } from "../messages.ts";
import type { HistoryMove, MessageFeed } from "../message-feed.ts";
import { INSTRUCTIONS_KEY } from "../prompt/context.ts";
import { usableBySql } from "../workspace-access.ts";
import { CHAT_CHANNEL, notifySql } from "./change.ts";
import { claimCreatedSql, toAcquired } from "./claim.ts";
import {
  loadChat,
  startTurn,
  transition,
  type LocalClaim,
  type Locked,
  type UserInput,
} from "./core.ts";
import type { ChangePart } from "./fenced.ts";
import { insertMessagesSql, messageRecord } from "./message-rows.ts";
import { storableParts, storableText } from "./storable.ts";

export interface CreateChatInput {
  ownerId: string;
  /** A workspace the owner may use (workspace-access.ts usableBy), or none. */
  workspaceId: string | null;
  /** An enabled model config, or none. */
  modelConfigId: string | null;
  /** Default: the first message's first line ({@link titleOf}), or none without a message. */
  title?: string;
  message?: string;
  /** Writes riding along on the creating statement (the API's audit entry): they read `c`. */
  parts?: readonly ChangePart[];
}

/**
 * Creates the chat in one statement, which also checks what the chat names: a workspace its
 * owner may use and an enabled model (ChatRefusedError, and nothing written, otherwise). The
 * insert is the chat's first transition, at version 1. With a message the turn starts in the
 * same statement (the chat running at history version 1, its first message in history: what
 * startTurn makes of a chat with no history), and the chat is created claimed by `claim`'s
 * worker (claim.ts claimCreatedSql: its runner starts once this resolves) or its change is
 * notified.
 */
export async function createChat(
  q: Queryable,
  input: CreateChatInput,
  /** Runs the chat's first turn on this replica (core.ts LocalClaim). */
  claim?: LocalClaim,
): Promise<Chat> {
  return (await createChatWithHistory(q, input, claim)).chat;
}

/**
 * createChat, answering also the history the chat was created with when `claim` claimed it:
 * what its runner starts from, and all the chat holds until that runner commits.
 */
export async function createChatWithHistory(
  q: Queryable,
  input: CreateChatInput,
  claim?: LocalClaim,
): Promise<{ chat: Chat; history?: ChatMessage[] }> {
  const started = input.message !== undefined;
  const params: unknown[] = [
    randomUUID(),
    input.ownerId,
    input.workspaceId,
    input.modelConfigId,
    storableText(input.title ?? titleOf(input.message ?? "")),
    started ? 1 : 0,
    started ? "running" : "waiting",
    JSON.stringify(started ? [messageRecord(userMessage(input.message!, input.ownerId))] : []),
  ];
  const p = (value: unknown): string => `$${params.push(value)}`;
  const claimed =
    started && claim
      ? claimCreatedSql(p(claim.workerId), { instructionsKey: p(INSTRUCTIONS_KEY) })
      : undefined;
  const notify = started && !claimed ? notifySql(p(CHAT_CHANNEL), "c") : undefined;
  const parts = (input.parts ?? []).map((part) => part(p));
  const ctes = [
    `ok AS (SELECT
       ($3::uuid IS NULL OR EXISTS (SELECT 1 FROM workspaces w WHERE w.id = $3 AND ${usableBySql("$2", "w")})) AS workspace_ok,
       ($4::uuid IS NULL OR EXISTS (SELECT 1 FROM model_configs mc WHERE mc.id = $4 AND mc.enabled)) AS model_ok)`,
    `c AS (INSERT INTO chats (id, owner_id, workspace_id, model_config_id, title,
         snapshot_version, history_version, status${claimed ? `, ${claimed.insertColumns}` : ""})
       SELECT $1, $2, $3, $4, $5, 1, $6, $7${claimed ? `, ${claimed.insertValues}` : ""}
       FROM ok WHERE ok.workspace_ok AND ok.model_ok
       RETURNING *)`,
    `m AS (${insertMessagesSql({ chatId: "c.id", records: "$8", from: "c" })} RETURNING *)`,
    ...(claimed?.ctes ?? []),
    ...(notify ? [notify.cte] : []),
    ...parts.flatMap((x) => x.ctes),
  ];
  const answers = [notify?.answer, ...parts.map((x) => x.answer)].filter((a) => a !== undefined);
  const r = await q.query(
    `WITH ${ctes.join(",\n")}
     SELECT ok.workspace_ok, ok.model_ok, ${claimed ? claimed.columns : "c.*"}
       ${answers.map((a) => `, ${a}`).join("")}
     FROM ok LEFT JOIN c ON true
     ${claimed?.joins ?? ""}`,
    params,
  );
  const row = r.rows[0]!;
  if (!row.workspace_ok) throw new ChatRefusedError("workspace_id", input.workspaceId!);
  if (!row.model_ok) throw new ChatRefusedError("model_id", input.modelConfigId!);
  if (!claimed || !claim) return { chat: rowToChat(row) };
  const acquired = toAcquired(row);
  claim.created(acquired);
  return {
    chat: acquired.chat,
    ...(acquired.start.history && { history: acquired.start.history }),
  };
}

/** The message a user's text becomes in history. */
export function userMessage(text: string, userId: string): NewMessage {
  return { role: "user", visibility: "both", content: textContent(text), createdBy: userId };
}

export interface SendResult {
  messageId?: string;
  queued: boolean;
}

/**
 * A user message: into history at once when the chat is idle (it starts running), queued
 * when it is busy (it runs when the turn ends). `interrupt` also asks the running turn to
 * stop (CHATD.md 8).
 */
export async function sendMessage(
  db: Database,
  chatId: string,
  userId: string,
  text: string,
  busy: "queue" | "interrupt",
  /** This replica's feed (message-feed.ts): the messages go to its streams once committed. */
  feed?: MessageFeed,
  /** Runs a turn the message starts on this replica (core.ts LocalClaim). */
  claim?: LocalClaim,
): Promise<SendResult> {
  const committed = feed?.committing(chatId);
  let moved: HistoryMove | undefined;
  try {
    const sent = await transition(
      db,
      chatId,
      async (l) => {
        moved = undefined;
        if (isIdle(l.chat)) {
          const inserted: ChatMessage[] = (l.inserted = []);
          const m = await startTurn(l, { content: textContent(text), createdBy: userId });
          moved = { before: l.chat.historyVersion, after: l.version, messages: inserted };
          return { messageId: m.id, queued: false };
        }
        await enqueue(l, { content: textContent(text), createdBy: userId });
        if (busy === "interrupt") await askToStop(l);
        return { queued: true };
      },
      claim,
    );
    committed?.(moved);
    return sent;
  } finally {
    committed?.(); // not committed (a call after the one above does nothing)
  }
}

/**
 * Replaces user message `messageId` with `text` and discards the history after it (CHATD.md
 * 3). An idle chat starts again from the edit at once; a busy one is interrupted first, so
 * the running calls get their real results (canceled, not run, ...) before the branch they
 * belong to is discarded, and the edit takes effect when the interruption ends. A newer edit
 * replaces an edit still waiting.
 */
export async function editMessage(
  db: Database,
  chatId: string,
  userId: string,
  messageId: string,
  text: string,
  /** Runs a turn the edit starts on this replica (core.ts LocalClaim). */
  claim?: LocalClaim,
): Promise<SendResult> {
  return transition(
    db,
    chatId,
    async (l) => {
      const r = await l.tx.query<{ role: string }>(
        "SELECT role FROM chat_messages WHERE id = $1 AND chat_id = $2 AND NOT deleted AND visibility <> 'model'",
        [messageId, chatId],
      );
      const target = r.rows[0];
      if (!target) throw new MessageNotEditableError(messageId, "not_found");
      if (target.role !== "user") throw new MessageNotEditableError(messageId, "not_user_message");
      const edit = { content: textContent(text), createdBy: userId, editOf: messageId };
      if (isIdle(l.chat)) {
        const m = await startTurn(l, edit);
        return { messageId: m.id, queued: false };
      }
      await l.tx.query(
        "DELETE FROM chat_queued_messages WHERE chat_id = $1 AND edit_of IS NOT NULL",
        [chatId],
      );
      await enqueue(l, edit);
      await askToStop(l);
      return { queued: true };
    },
    claim,
  );
}

/** A message waiting in a chat's queue: a message sent while busy, or an edit in waiting. */
export interface QueuedMessage {
  id: string;
  content: MessagePart[];
  createdBy: string | null;
  createdAt: Date;
  /** The message this one replaces when it runs (an edit), if it is one. */
  editOf: string | null;
}

/** The chat's queue in the order it runs: an edit first (it interrupted the turn), then FIFO. */
export async function loadQueue(q: Queryable, chatId: string): Promise<QueuedMessage[]> {
  const r = await q.query<{
    id: string;
    content: MessagePart[];
    created_by: string | null;
    created_at: Date;
    edit_of: string | null;
  }>(
    `SELECT id::text, content, created_by, created_at, edit_of::text FROM chat_queued_messages
     WHERE chat_id = $1 ORDER BY edit_of IS NULL, id`,
    [chatId],
  );
  return r.rows.map((m) => ({
    id: m.id,
    content: m.content,
    createdBy: m.created_by,
    createdAt: m.created_at,
    editOf: m.edit_of,
  }));
}

/**
 * Takes a queued message out of the queue before it runs; false when it is not there (it ran
 * already, or never was). An edit in waiting cannot be taken out: its interruption is under
 * way and the history it discards is already decided.
 */
export async function removeQueued(
  db: Database,
  chatId: string,
  queuedId: string,
): Promise<boolean> {
  return transition(db, chatId, async (l) => {
    const r = await l.tx.query(
      "DELETE FROM chat_queued_messages WHERE id = $1 AND chat_id = $2 AND edit_of IS NULL RETURNING id",
      [queuedId, chatId],
    );
    if (r.rows.length === 0) return false;
    await l.tx.query("UPDATE chats SET queue_version = $2 WHERE id = $1", [chatId, l.version]);
    return true;
  });
}

function textContent(text: string): MessagePart[] {
  return [{ type: "text", text }];
}

function isIdle(chat: Chat): boolean {
  return chat.status === "waiting" || chat.status === "error";
}

async function enqueue(l: Locked, input: UserInput): Promise<void> {
  await l.tx.query(
    "INSERT INTO chat_queued_messages (chat_id, content, created_by, edit_of) VALUES ($1, $2, $3, $4)",
    [
      l.chat.id,
      JSON.stringify(storableParts(input.content)),
      input.createdBy,
      input.editOf ?? null,
    ],
  );
  await l.tx.query("UPDATE chats SET queue_version = $2 WHERE id = $1", [l.chat.id, l.version]);
}

async function askToStop(l: Locked): Promise<void> {
  if (l.chat.status === "running") {
    // The generation task stops; what its retries recorded is no longer the chat's state.
    await l.tx.query("UPDATE chats SET status = 'interrupting', retry_state = NULL WHERE id = $1", [
      l.chat.id,
    ]);
  }
}

/** Asks a running chat to stop (CHATD.md 8); anything else is left as it is. */
export async function interrupt(db: Database, chatId: string): Promise<Chat["status"]> {
  return transition(db, chatId, async (l) => {
    await askToStop(l);
    return l.chat.status === "running" ? "interrupting" : l.chat.status;
  });
}

/**
 * Asks for a compaction (docs/prompt.md): it is the chat's next action. A waiting chat runs for
 * it (and waits again after); a running one compacts once its tool calls have results; an
 * interrupting or failed one keeps the request for its next turn. Answers the status after.
 */
export async function requestCompaction(db: Database, chatId: string): Promise<Chat["status"]> {
  return transition(db, chatId, async (l) => {
    await l.tx.query("UPDATE chats SET compact_requested = true WHERE id = $1", [chatId]);
    if (l.chat.status !== "waiting" || l.chat.archived) return l.chat.status;
    await l.tx.query("UPDATE chats SET status = 'running', last_error = NULL WHERE id = $1", [
      chatId,
    ]);
    return "running";
  });
}

/** What a chat's owner may change about the chat itself (not its history). */
export interface ChatPatch {
  title?: string;
  archived?: boolean;
}

/** Why a chat patch was refused. */
export class ChatBusyError extends Error {
  override readonly name = "ChatBusyError";
  constructor(readonly chatId: string) {
    super("The chat is running; interrupt it before archiving it.");
  }
}

/**
 * Renames or (un)archives a chat. Only an idle chat is archived: an archived chat is never
 * acquired by a worker, so a busy one would stay `running` with nobody driving it (a new
 * message unarchives it again, in startTurn).
 */
export async function updateChat(db: Database, chatId: string, patch: ChatPatch): Promise<Chat> {
  await transition(db, chatId, async (l) => {
    if (patch.archived === true && !l.chat.archived && !isIdle(l.chat))
      throw new ChatBusyError(chatId);
    if (patch.title !== undefined)
      await l.tx.query("UPDATE chats SET title = $2 WHERE id = $1", [chatId, patch.title]);
    if (patch.archived !== undefined)
      await l.tx.query("UPDATE chats SET archived = $2 WHERE id = $1", [chatId, patch.archived]);
  });
  return (await loadChat(db, chatId))!;
}
