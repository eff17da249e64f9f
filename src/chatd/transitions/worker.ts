// The worker side's transitions (CHATD.md 3, 4) beside its leases (claim.ts): read for a task,
// and the fenced writes of a task — commit a step (with what rides along on it), count an
// attempt, record a retry, finish the turn, the interruption or with an error, and let go. A
// stale task's write fails its fence.

import { ChatNotFoundError, checkFence, rowToChat, type Chat, type Fence } from "../chats.ts";
import type { Database } from "../db/index.ts";
import { rowToMessage, type ChatMessage, type MessagePart, type NewMessage } from "../messages.ts";
import {
  answerOutstanding,
  insertMessages,
  loadModelHistory,
  startTurn,
  transition,
  type Locked,
} from "./core.ts";
import {
  fencedWrite,
  fencedWriteIf,
  type ChangePart,
  type FencedChange,
  type Written,
} from "./fenced.ts";
import type { ContextSnapshot } from "../prompt/context.ts";
import type { HeldChat } from "./held.ts";
import { storableJson, storableText } from "./storable.ts";

/** A chat's history since the boundary (as loadModelHistory), each row with the chat's version. */
const HISTORY_AT_SQL = `
  SELECT c.history_version AS at_history_version, m.* FROM chats c
  LEFT JOIN LATERAL (
    SELECT * FROM chat_messages WHERE chat_id = c.id AND NOT deleted
      AND id >= COALESCE((SELECT max(id) FROM chat_messages
                          WHERE chat_id = c.id AND boundary AND NOT deleted), 0)
  ) m ON true
  WHERE c.id = $1
  ORDER BY m.id`;

/**
 * A task's read: the chat, checked against the fence, and its history since the boundary —
 * what `held` has of them when it has them (no round trip), else read under a share lock.
 */
export async function readForTask(
  db: Database,
  fence: Fence,
  held?: HeldChat,
): Promise<{ chat: Chat; history: ChatMessage[] }> {
  const kept = held?.forTask(fence);
  if (kept) {
    checkFence(kept.chat, fence);
    return kept;
  }
  const chat = held?.chat;
  if (chat && chat.historyVersion === fence.historyVersion) {
    // The chat is held (as just claimed) without its history: the history alone, in a statement
    // that also answers the history version it is of, so a change since the claim is seen.
    checkFence(chat, fence);
    const r = await db.query(HISTORY_AT_SQL, [fence.chatId]);
    if (r.rows[0] && String(r.rows[0].at_history_version) === chat.historyVersion) {
      const history = r.rows.filter((row) => row.id !== null).map(rowToMessage);
      held?.holdHistory(chat, history);
      return { chat, history };
    }
  }
  const read = await db.transaction(async (tx) => {
    const r = await tx.query("SELECT * FROM chats WHERE id = $1 FOR SHARE", [fence.chatId]);
    if (!r.rows[0]) throw new ChatNotFoundError(fence.chatId);
    const chat = rowToChat(r.rows[0]);
    checkFence(chat, fence);
    return { chat, history: await loadModelHistory(tx, fence.chatId) };
  });
  held?.read(read.chat, read.history);
  return read;
}

/** A fenced write, and what it wrote kept in `held`. */
async function write(
  db: Database,
  fence: Fence,
  change: FencedChange,
  held: HeldChat | undefined,
): Promise<Written> {
  // Once committed, the write's change (and messages) go to whoever follows the chat: it sends
  // no notification (fenced.ts).
  const committed = held?.committing(fence);
  try {
    const w = await fencedWrite(db, fence, change);
    held?.wrote(w, change.nextAttempt);
    committed?.(w);
    return w;
  } catch (err) {
    committed?.();
    held?.drop(); // the chat is not what was held: the next task reads it
    throw err;
  }
}

/** Commits a generation step (an assistant message, or a batch's results); history moves. */
export async function commitStep(
  db: Database,
  fence: Fence,
  messages: NewMessage[],
  held?: HeldChat,
  o: StepOptions = {},
): Promise<Written> {
  const w = await write(db, fence, stepChange(messages, o), held);
  heldAfterStep(w, o, held);
  return w;
}

/**
 * Commits a compaction's boundary message (docs/prompt.md): history moves, so the next task
 * decides again from the summary, and the request (if any) is done. Fenced like a model step
 * (ownership, status, history and attempt): a retried or interrupted compaction whose chat
 * moved on writes nothing, so one compaction commits one boundary.
 */
export async function commitCompaction(
  db: Database,
  fence: Fence,
  boundary: NewMessage,
  held?: HeldChat,
): Promise<ChatMessage> {
  const w = await write(
    db,
    fence,
    { messages: [{ ...boundary, boundary: true }], set: "compact_requested = false" },
    held,
  );
  return w.messages[0]!;
}

/**
 * Keeps the chat's first context snapshot (docs/prompt.md) with the first model step that used
 * it, in that step's statement; a snapshot already kept wins. `kept(also)` answers whether
 * this one was kept, and when, from the statement's answer.
 */
export function keepSnapshotPart(snapshot: ContextSnapshot): ChangePart {
  return (p) => ({
    ctes: [
      `k AS (INSERT INTO chat_contexts (chat_id, snapshot) SELECT c.id, ${p(JSON.stringify(snapshot))}::jsonb FROM c
             ON CONFLICT (chat_id) DO NOTHING RETURNING captured_at)`,
    ],
    answer: "(SELECT captured_at FROM k) AS kept_at",
  });
}

/** A step's commit (commitStep, commitFinalStep) and what rides along on it. */
export interface StepOptions {
  /** The next action calls the model: its attempt is recorded with this commit. */
  nextAttempt?: boolean;
  /** A context snapshot taken for this step, kept with it (held as kept once written). */
  keep?: ContextSnapshot;
  /** More writes of other concerns (batch-start.ts's): their answers are in Written.also. */
  parts?: ChangePart[];
}

function stepChange(messages: NewMessage[], o: StepOptions): FencedChange {
  return {
    messages,
    ...(o.nextAttempt && { nextAttempt: true }),
    parts: [...(o.keep ? [keepSnapshotPart(o.keep)] : []), ...(o.parts ?? [])],
  };
}

/** After a step's commit: the snapshot it kept (if it did; else the one kept before wins). */
function heldAfterStep(w: Written, o: StepOptions, held: HeldChat | undefined): void {
  if (!held || !o.keep) return;
  const keptAt = w.also.kept_at as Date | null;
  held.snapshot = keptAt ? { snapshot: o.keep, capturedAt: keptAt } : undefined;
  held.unkept = undefined;
}

/** Counts a generation attempt for the current history (the stream buffer's episode key). */
export async function recordGenerationAttempt(
  db: Database,
  fence: Fence,
  held?: HeldChat,
): Promise<number> {
  const reserved = held?.takeAttempt(fence);
  if (reserved !== undefined) return reserved;
  const w = await write(db, fence, { nextAttempt: true }, held);
  return w.chat.generationAttempt;
}

/**
 * Records a failed attempt of the task (its `retrying`, see retrying.ts): `attempt` failures in
 * a row, the last one in words, and the next attempt `delayMs` from now on the database clock.
 */
export async function recordRetryState(
  db: Database,
  fence: Fence,
  state: { attempt: number; lastError: string; delayMs: number },
  held?: HeldChat,
): Promise<void> {
  await write(
    db,
    fence,
    {
      set: `retry_state = jsonb_build_object(
         'status', status, 'history_version', history_version::text, 'attempt', $8::int,
         'last_error', $9::text,
         'next_attempt_at', to_jsonb(now() + make_interval(secs => $10::float8 / 1000)))`,
      params: [state.attempt, storableText(state.lastError), Math.max(0, state.delayMs)],
    },
    held,
  );
}

const RELEASE = "worker_id = NULL, runner_id = NULL, retry_state = NULL";

async function release(l: Locked): Promise<void> {
  await l.tx.query("DELETE FROM chat_heartbeats WHERE chat_id = $1", [l.chat.id]);
}

/**
 * Most turns end with nothing queued: the chat waits and its runner lets go, in one statement
 * (with the turn's last `messages`, if any). Only while the chat is as the runner holds it (its
 * snapshot version) and the queue is empty: a message queued since bumped the version (a
 * transition), so the row check sees it. False, with nothing written, when that is not so.
 */
async function endTurnIfIdle(
  db: Database,
  fence: Fence,
  messages: NewMessage[],
  held: HeldChat | undefined,
  o: StepOptions = {},
): Promise<Written | undefined> {
  const seen = held?.chat?.snapshotVersion;
  if (seen === undefined) return undefined;
  const committed = held?.committing(fence);
  const w = await fencedWriteIf(db, fence, {
    ...stepChange(messages, o),
    // A message insert clears the retry state itself.
    set: `status = 'waiting', worker_id = NULL, runner_id = NULL${messages.length > 0 ? "" : ", retry_state = NULL"}`,
    where: `snapshot_version = $8 AND NOT EXISTS (SELECT 1 FROM chat_queued_messages q WHERE q.chat_id = chats.id)`,
    ctes: ["h AS (DELETE FROM chat_heartbeats WHERE chat_id IN (SELECT id FROM c))"],
    params: [seen],
  }).catch((err: unknown) => {
    committed?.();
    held?.drop();
    throw err;
  });
  committed?.(w);
  if (!w) return undefined;
  held?.wrote(w);
  heldAfterStep(w, o, held);
  return w;
}

/**
 * Commits a turn's final answer and ends the turn with it when nothing is queued (one
 * statement); else commits it alone, and the next task ends the turn.
 */
export async function commitFinalStep(
  db: Database,
  fence: Fence,
  messages: NewMessage[],
  held?: HeldChat,
  o: StepOptions = {},
): Promise<Written> {
  return (
    (await endTurnIfIdle(db, fence, messages, held, o)) ??
    (await commitStep(db, fence, messages, held, o))
  );
}

/**
 * The turn is over: the next queued message starts the next turn (the chat stays running),
 * or the chat waits for the user and its runner lets go.
 */
export async function finishTurn(
  db: Database,
  fence: Fence,
  held?: HeldChat,
): Promise<"running" | "waiting"> {
  if (await endTurnIfIdle(db, fence, [], held)) return "waiting";
  held?.drop(); // a new turn (or none): the runner reads the chat again
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
 * turn, else the chat waits. `error` (an interrupt task that could not finish) is kept as the
 * waiting chat's last_error for the user to read.
 */
export async function finishInterruption(
  db: Database,
  fence: Fence,
  messages: NewMessage[] = [],
  error?: { message: string; detail?: string },
  held?: HeldChat,
): Promise<"running" | "waiting"> {
  held?.drop();
  return transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    await insertMessages(l, messages);
    await answerOutstanding(l, "interrupted");
    // An interrupted compaction is not asked for again: the user stopped it.
    await l.tx.query("UPDATE chats SET compact_requested = false WHERE id = $1", [l.chat.id]);
    const next = await popQueueOrWait(l);
    if (error && next === "waiting") {
      await l.tx.query("UPDATE chats SET last_error = $2 WHERE id = $1", [
        l.chat.id,
        storableJson(error),
      ]);
    }
    return next;
  });
}

/**
 * The turn failed for good: the chat shows the error and waits for the user. `messages` (the
 * results of calls the task refused to send) go in with it, in the same transaction.
 */
export async function finishError(
  db: Database,
  fence: Fence,
  error: { message: string; detail?: string },
  messages: NewMessage[] = [],
  held?: HeldChat,
): Promise<void> {
  held?.drop();
  await transition(db, fence.chatId, async (l) => {
    checkFence(l.chat, fence);
    await insertMessages(l, messages);
    await l.tx.query(
      `UPDATE chats SET status = 'error', last_error = $2, ${RELEASE} WHERE id = $1`,
      [fence.chatId, storableJson(error)],
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
