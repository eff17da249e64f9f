// Transitions (CHATD.md 3): every change of a chat's execution state is one transaction that
// locks the chat row, bumps snapshot_version first, then writes; a message insert moves
// history_version and resets generation_attempt; task writes check their fence under the
// lock; a notification goes out on commit (pg_notify is delivered only if the commit happens).

import { randomUUID } from "node:crypto";
import {
  checkFence,
  ChatNotFoundError,
  MessageNotEditableError,
  rowToChat,
  titleOf,
  type Chat,
  type Fence,
} from "./chats.ts";
import type { Database, Queryable } from "./db/index.ts";
import {
  rowToMessage,
  unresolvedToolCalls,
  type ChatMessage,
  type MessagePart,
  type NewMessage,
} from "./messages.ts";

/** LISTEN/NOTIFY channel of chat changes; the payload is a JSON {@link ChatChange}. */
export const CHAT_CHANNEL = "tether_chats";

export interface ChatChange {
  chat_id: string;
  snapshot_version: string;
  history_version: string;
  status: Chat["status"];
  runner_id: string | null;
}

async function notifyChange(tx: Queryable, chatId: string): Promise<void> {
  const r = await tx.query<{
    snapshot_version: string;
    history_version: string;
    status: Chat["status"];
    runner_id: string | null;
  }>("SELECT snapshot_version, history_version, status, runner_id FROM chats WHERE id = $1", [
    chatId,
  ]);
  const c = r.rows[0]!;
  const change: ChatChange = { chat_id: chatId, ...c };
  await tx.query("SELECT pg_notify($1, $2)", [CHAT_CHANNEL, JSON.stringify(change)]);
}

/** A transition's view: the locked chat and the snapshot version it now writes at. */
interface Locked {
  tx: Queryable;
  chat: Chat;
  version: string;
}

async function transition<T>(
  db: Database,
  chatId: string,
  fn: (l: Locked) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    const found = await tx.query("SELECT * FROM chats WHERE id = $1 FOR UPDATE", [chatId]);
    if (found.rows.length === 0) throw new ChatNotFoundError(chatId);
    const bumped = await tx.query<{ snapshot_version: string }>(
      "UPDATE chats SET snapshot_version = snapshot_version + 1, updated_at = now() WHERE id = $1 RETURNING snapshot_version",
      [chatId],
    );
    const version = bumped.rows[0]!.snapshot_version;
    const result = await fn({ tx, chat: rowToChat(found.rows[0]!), version });
    await notifyChange(tx, chatId);
    return result;
  });
}

async function insertMessages(l: Locked, messages: NewMessage[]): Promise<ChatMessage[]> {
  const inserted: ChatMessage[] = [];
  for (const m of messages) {
    const r = await l.tx.query(
      `INSERT INTO chat_messages (chat_id, role, visibility, content, created_by, input_tokens, output_tokens, runtime_ms, cost_micros, revision)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
      [
        l.chat.id,
        m.role,
        m.visibility,
        JSON.stringify(m.content),
        m.createdBy ?? null,
        m.inputTokens ?? 0,
        m.outputTokens ?? 0,
        Math.round(m.runtimeMs ?? 0),
        m.costMicros ?? 0,
        m.revision ?? 0,
      ],
    );
    inserted.push(rowToMessage(r.rows[0]!));
  }
  if (messages.length > 0) {
    await l.tx.query(
      "UPDATE chats SET history_version = $2, generation_attempt = 0 WHERE id = $1",
      [l.chat.id, l.version],
    );
  }
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
async function answerOutstanding(
  l: Locked,
  why: "turn_ended" | "interrupted" = "turn_ended",
): Promise<void> {
  const open = unresolvedToolCalls(await loadHistory(l.tx, l.chat.id));
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

// ---- API side ----------------------------------------------------------------------------

export interface CreateChatInput {
  ownerId: string;
  workspaceId: string | null;
  modelConfigId: string | null;
  /** Default: the first message's first line ({@link titleOf}), or none without a message. */
  title?: string;
  message?: string;
}

export async function createChat(db: Database, input: CreateChatInput): Promise<Chat> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO chats (id, owner_id, workspace_id, model_config_id, title) VALUES ($1, $2, $3, $4, $5)`,
    [
      id,
      input.ownerId,
      input.workspaceId,
      input.modelConfigId,
      input.title ?? titleOf(input.message ?? ""),
    ],
  );
  if (input.message !== undefined) await sendMessage(db, id, input.ownerId, input.message, "queue");
  return (await loadChat(db, id))!;
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
): Promise<SendResult> {
  return transition(db, chatId, async (l) => {
    if (isIdle(l.chat)) {
      const m = await startTurn(l, { content: textContent(text), createdBy: userId });
      return { messageId: m.id, queued: false };
    }
    await enqueue(l, { content: textContent(text), createdBy: userId });
    if (busy === "interrupt") await askToStop(l);
    return { queued: true };
  });
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
): Promise<SendResult> {
  return transition(db, chatId, async (l) => {
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
  });
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

/** A user message to put in history, or an edit of `editOf`. */
interface UserInput {
  content: MessagePart[];
  createdBy: string | null;
  editOf?: string | null;
}

function textContent(text: string): MessagePart[] {
  return [{ type: "text", text }];
}

function isIdle(chat: Chat): boolean {
  return chat.status === "waiting" || chat.status === "error";
}

/**
 * Puts a user message into history and runs the chat. Outstanding calls get a result first
 * (C7); an edit then discards the replaced message and everything after it.
 */
async function startTurn(l: Locked, input: UserInput): Promise<ChatMessage> {
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
  const [m] = await insertMessages(l, [
    {
      role: "user",
      visibility: "both",
      content: input.content,
      createdBy: input.createdBy,
      revision,
    },
  ]);
  await l.tx.query(
    "UPDATE chats SET status = 'running', last_error = NULL, retry_state = NULL WHERE id = $1",
    [l.chat.id],
  );
  return m!;
}

async function enqueue(l: Locked, input: UserInput): Promise<void> {
  await l.tx.query(
    "INSERT INTO chat_queued_messages (chat_id, content, created_by, edit_of) VALUES ($1, $2, $3, $4)",
    [l.chat.id, JSON.stringify(input.content), input.createdBy, input.editOf ?? null],
  );
  await l.tx.query("UPDATE chats SET queue_version = $2 WHERE id = $1", [l.chat.id, l.version]);
}

async function askToStop(l: Locked): Promise<void> {
  if (l.chat.status === "running") {
    await l.tx.query("UPDATE chats SET status = 'interrupting' WHERE id = $1", [l.chat.id]);
  }
}

/** Asks a running chat to stop (CHATD.md 8); anything else is left as it is. */
export async function interrupt(db: Database, chatId: string): Promise<Chat["status"]> {
  return transition(db, chatId, async (l) => {
    await askToStop(l);
    return l.chat.status === "running" ? "interrupting" : l.chat.status;
  });
}

// ---- worker side -------------------------------------------------------------------------

export interface Acquired {
  chatId: string;
  runnerId: string;
  /** The worker that owned the chat before (a takeover), or null when nobody did. */
  previousWorkerId: string | null;
}

/**
 * Claims up to `limit` runnable chats (running or interrupting) that nobody owns or whose
 * lease is older than `leaseMs`, each with a fresh runner ID and lease. `ignoreLeases`
 * takes every runnable chat at once (a single replica starting up on its own database).
 */
export async function acquire(
  db: Database,
  workerId: string,
  o: { leaseMs: number; limit: number; ignoreLeases?: boolean },
): Promise<Acquired[]> {
  return db.transaction(async (tx) => {
    const r = await tx.query<{ id: string; runner_id: string; previous_worker_id: string | null }>(
      `WITH claim AS (
         SELECT c.id, c.worker_id AS previous_worker_id FROM chats c LEFT JOIN chat_heartbeats h ON h.chat_id = c.id
         WHERE c.status IN ('running', 'interrupting') AND NOT c.archived
           AND ($4 OR c.worker_id IS NULL OR h.heartbeat_at IS NULL
                OR h.heartbeat_at < now() - make_interval(secs => $2::float8 / 1000))
         ORDER BY c.updated_at
         LIMIT $3
         FOR UPDATE OF c SKIP LOCKED)
       UPDATE chats SET worker_id = $1, runner_id = gen_random_uuid(),
                        snapshot_version = snapshot_version + 1, updated_at = now()
       FROM claim WHERE chats.id = claim.id
       RETURNING chats.id, chats.runner_id, claim.previous_worker_id`,
      [workerId, o.leaseMs, o.limit, o.ignoreLeases ?? false],
    );
    for (const c of r.rows) {
      await tx.query(
        `INSERT INTO chat_heartbeats (chat_id, runner_id, heartbeat_at) VALUES ($1, $2, now())
         ON CONFLICT (chat_id) DO UPDATE SET runner_id = EXCLUDED.runner_id, heartbeat_at = now()`,
        [c.id, c.runner_id],
      );
      await notifyChange(tx, c.id);
    }
    return r.rows.map((c) => ({
      chatId: c.id,
      runnerId: c.runner_id,
      previousWorkerId: c.previous_worker_id,
    }));
  });
}

/**
 * Renews, in one statement, the lease of every chat this worker still owns through one of
 * `runnerIds` (its live runners); answers those chats. A chat owned in the database with no
 * live runner is not renewed, so its lease runs out and it is acquired again.
 */
export async function heartbeat(
  db: Database,
  workerId: string,
  runnerIds: string[],
): Promise<Set<string>> {
  const r = await db.query<{ chat_id: string }>(
    `UPDATE chat_heartbeats h SET heartbeat_at = now() FROM chats c
     WHERE c.id = h.chat_id AND c.worker_id = $1 AND c.runner_id = h.runner_id
       AND h.runner_id = ANY($2::uuid[])
     RETURNING h.chat_id`,
    [workerId, runnerIds],
  );
  return new Set(r.rows.map((x) => x.chat_id));
}

/** A task's locked read: the chat, checked against the fence, and its history. */
export async function readForTask(
  db: Database,
  fence: Fence,
): Promise<{ chat: Chat; history: ChatMessage[] }> {
  return db.transaction(async (tx) => {
    const r = await tx.query("SELECT * FROM chats WHERE id = $1 FOR SHARE", [fence.chatId]);
    if (!r.rows[0]) throw new ChatNotFoundError(fence.chatId);
    const chat = rowToChat(r.rows[0]);
    checkFence(chat, fence);
    return { chat, history: await loadHistory(tx, fence.chatId) };
  });
}

/** Commits a generation step (an assistant message, or a batch's results); history moves. */
export async function commitStep(
  db: Database,
  fence: Fence,
  messages: NewMessage[],
): Promise<ChatMessage[]> {
  return transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    return insertMessages(l, messages);
  });
}

/** Counts a generation attempt for the current history (the stream buffer's episode key). */
export async function recordGenerationAttempt(db: Database, fence: Fence): Promise<number> {
  return transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    const r = await l.tx.query<{ generation_attempt: number }>(
      "UPDATE chats SET generation_attempt = generation_attempt + 1 WHERE id = $1 RETURNING generation_attempt",
      [fence.chatId],
    );
    return r.rows[0]!.generation_attempt;
  });
}

export async function recordRetryState(db: Database, fence: Fence, state: unknown): Promise<void> {
  await transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    await l.tx.query("UPDATE chats SET retry_state = $2 WHERE id = $1", [
      fence.chatId,
      JSON.stringify(state),
    ]);
  });
}

const RELEASE = "worker_id = NULL, runner_id = NULL, retry_state = NULL";

async function release(l: Locked): Promise<void> {
  await l.tx.query("DELETE FROM chat_heartbeats WHERE chat_id = $1", [l.chat.id]);
}

/**
 * The turn is over: the next queued message starts the next turn (the chat stays running),
 * or the chat waits for the user and its runner lets go.
 */
export async function finishTurn(db: Database, fence: Fence): Promise<"running" | "waiting"> {
  return transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    return popQueueOrWait(l);
  });
}

/** The next queued input (an edit before any message: it is what interrupted the turn). */
async function popQueueOrWait(l: Locked): Promise<"running" | "waiting"> {
  const next = await l.tx.query<{
    content: MessagePart[];
    created_by: string | null;
    edit_of: string | null;
  }>(
    `DELETE FROM chat_queued_messages WHERE id = (
       SELECT id FROM chat_queued_messages WHERE chat_id = $1 ORDER BY edit_of IS NULL, id LIMIT 1)
     RETURNING content, created_by, edit_of`,
    [l.chat.id],
  );
  const queued = next.rows[0];
  if (queued) {
    await startTurn(l, {
      content: queued.content,
      createdBy: queued.created_by,
      editOf: queued.edit_of,
    });
    await l.tx.query("UPDATE chats SET queue_version = $2 WHERE id = $1", [l.chat.id, l.version]);
    return "running";
  }
  await l.tx.query(`UPDATE chats SET status = 'waiting', ${RELEASE} WHERE id = $1`, [l.chat.id]);
  await release(l);
  return "waiting";
}

/**
 * Ends an interruption (CHATD.md 8 step 4): the interrupt task's `messages` (the partial
 * assistant message, one result per unresolved call, the usage record) go in; any call still
 * without a result gets an honest unknown; then the queued message (if any) starts the next
 * turn, else the chat waits.
 */
export async function finishInterruption(
  db: Database,
  fence: Fence,
  messages: NewMessage[] = [],
): Promise<"running" | "waiting"> {
  return transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    await insertMessages(l, messages);
    await answerOutstanding(l, "interrupted");
    return popQueueOrWait(l);
  });
}

/** The turn failed for good: the chat shows the error and waits for the user. */
export async function finishError(
  db: Database,
  fence: Fence,
  error: { message: string; detail?: string },
): Promise<void> {
  await transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    await l.tx.query(
      `UPDATE chats SET status = 'error', last_error = $2, ${RELEASE} WHERE id = $1`,
      [fence.chatId, JSON.stringify(error)],
    );
    await release(l);
  });
}

/**
 * Lets go of a chat this runner owns (shutdown, or a status it does not run); the chat's
 * state is untouched, so another replica acquires it at once if it is still runnable.
 */
export async function abandon(
  db: Database,
  chatId: string,
  workerId: string,
  runnerId: string,
): Promise<void> {
  try {
    await transition(db, chatId, async (l) => {
      if (l.chat.workerId !== workerId || l.chat.runnerId !== runnerId) return;
      await l.tx.query(`UPDATE chats SET worker_id = NULL, runner_id = NULL WHERE id = $1`, [
        chatId,
      ]);
      await release(l);
    });
  } catch (err) {
    if (!(err instanceof ChatNotFoundError)) throw err;
  }
}
