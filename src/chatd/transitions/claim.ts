// A worker's leases (CHATD.md 4): the claim of runnable chats, which also answers what each
// claimed chat's runner starts from, and the renewal of the leases of the chats it runs.

import { rowToChat, type Chat } from "../chats.ts";
import type { Database, Queryable } from "../db/index.ts";
import { messagesFromJson, messagesJsonSql, type ChatMessage } from "../messages.ts";
import {
  instructionsOf,
  INSTRUCTIONS_KEY,
  type ContextPrefetch,
  type ContextSnapshot,
  type KeptSnapshot,
} from "../prompt/context.ts";
import type { StepAhead } from "../step-ahead.ts";
import { accessOf, accessRowSql, type WorkspaceAccess } from "../workspace-access.ts";
import { CHAT_CHANNEL, notifySql } from "./change.ts";

/**
 * What a claimed chat's runner starts from, read in the claim's statement: its history since
 * the boundary, its kept context snapshot, and what taking the first snapshot needs.
 */
export interface ClaimedStart {
  /** Undefined when the chat's history moved while it was claimed: the runner reads it. */
  history: ChatMessage[] | undefined;
  /** Null: no snapshot is kept yet. */
  snapshot: KeptSnapshot | null;
  /** The owner's access to the workspace at the claim (workspace-access.ts). */
  access: WorkspaceAccess;
  /** The organisation's instructions at the claim. */
  organization: string | null;
  /** The agent's context, asked for while the claim's statement ran (a new chat's; worker.ts). */
  prefetch?: ContextPrefetch;
  /** The chat's first model step, sent while the claim's statement ran (a new chat's; worker.ts). */
  ahead?: StepAhead;
}

export interface Acquired {
  chatId: string;
  runnerId: string;
  /** The worker that owned the chat before (a takeover), or null when nobody did. */
  previousWorkerId: string | null;
  /**
   * The chat's row as claimed: its runner starts from it. A running chat's generation attempt
   * is counted by the claim, for the model call that may come next (HeldChat.takeAttempt).
   */
  chat: Chat;
  start: ClaimedStart;
}

/**
 * What a claim statement does for each row of its CTE `claimed` (the chat rows as claimed, with
 * `previous_worker_id`): the CTE `lease` gives each its lease, and `columns` and `joins` answer
 * each runner's start (toAcquired) from the history given as `history` (a messagesJsonSql
 * column) of history version `historyAt`.
 */
function claimedSql(p: { instructionsKey: string; history: string; historyAt: string }): {
  ctes: string[];
  columns: string;
  joins: string;
} {
  return {
    ctes: [
      `lease AS (
       INSERT INTO chat_heartbeats (chat_id, runner_id, heartbeat_at)
       SELECT id, runner_id, now() FROM claimed
       ON CONFLICT (chat_id) DO UPDATE SET runner_id = EXCLUDED.runner_id, heartbeat_at = now())`,
    ],
    columns: `claimed.*,
       ${p.historyAt} AS history_at, ${p.history} AS history,
       k.snapshot AS kept_snapshot, k.captured_at AS kept_at,
       a.disabled AS owner_disabled, a.shared AS workspace_shared,
       a.owner_id AS workspace_owner_id,
       (SELECT s.value FROM settings s WHERE s.key = ${p.instructionsKey}) AS instructions`,
    joins: `LEFT JOIN chat_contexts k ON k.chat_id = claimed.id
     LEFT JOIN LATERAL (${accessRowSql("claimed.owner_id", "claimed.workspace_id")}) a ON true`,
  };
}

/**
 * The claim statement around `claim`, a CTE body that selects and locks the rows to claim (`id`,
 * `previous_worker_id`): each gets a fresh runner ID and lease, its change is notified (the
 * runner that had it stops; streams on other replicas follow the new owner), and the answer
 * holds each runner's start. The history is read as of the statement's snapshot, with the
 * history version of that snapshot (`history_at`): the row it locks may be newer, and then the
 * runner reads the history itself. `$1` is the worker; `p` names the other parameters.
 */
function claimSql(claim: string, p: { channel: string; instructionsKey: string }): string {
  const notify = notifySql(p.channel, "claimed");
  const claimed = claimedSql({
    instructionsKey: p.instructionsKey,
    history: messagesJsonSql(
      "claimed.id",
      `NOT m.deleted AND m.id >= COALESCE((SELECT max(b.id) FROM chat_messages b
         WHERE b.chat_id = claimed.id AND b.boundary AND NOT b.deleted), 0)`,
    ),
    historyAt: "(SELECT x.history_version FROM chats x WHERE x.id = claimed.id)",
  });
  return `WITH claim AS (${claim})
     , claimed AS (
       UPDATE chats SET worker_id = $1, runner_id = gen_random_uuid(),
                        snapshot_version = snapshot_version + 1, updated_at = now(),
                        generation_attempt = generation_attempt + (status = 'running')::int
       FROM claim WHERE chats.id = claim.id
       RETURNING chats.*, claim.previous_worker_id)
     , ${[...claimed.ctes, notify.cte].join("\n     , ")}
     SELECT ${claimed.columns}, ${notify.answer}
     FROM claimed
     ${claimed.joins}`;
}

/**
 * The claim of a chat as a statement creates it running, for `worker` (an SQL expression):
 * `insertColumns` and `insertValues` make the insert's row this worker's (a fresh runner, the
 * attempt of its first model call counted, as a claim counts it); given the statement's CTE
 * `c`, that insert, and `m`, its messages, `ctes` lease it, and `columns` and `joins` answer its
 * runner's start (toAcquired), joined to a FROM of one row. Nobody is notified: no runner had
 * the chat, and no stream can follow a chat before the statement that makes it commits.
 */
export function claimCreatedSql(
  worker: string,
  p: { instructionsKey: string },
): { insertColumns: string; insertValues: string; ctes: string[]; columns: string; joins: string } {
  const claimed = claimedSql({
    ...p,
    history: "(SELECT json_agg(m ORDER BY m.id) FROM m)",
    historyAt: "claimed.history_version",
  });
  return {
    insertColumns: "worker_id, runner_id, generation_attempt",
    insertValues: `${worker}, gen_random_uuid(), 1`,
    ctes: ["claimed AS (SELECT c.*, NULL::uuid AS previous_worker_id FROM c)", ...claimed.ctes],
    columns: claimed.columns,
    joins: `LEFT JOIN claimed ON true\n     ${claimed.joins}`,
  };
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
  // One statement: the claim, the leases, the notifications and each runner's start (one round
  // trip, even when a round claims nothing, as most do).
  const r = await db.query(
    claimSql(
      `SELECT c.id, c.worker_id AS previous_worker_id FROM chats c LEFT JOIN chat_heartbeats h ON h.chat_id = c.id
         WHERE c.status IN ('running', 'interrupting') AND NOT c.archived
           AND ($4 OR c.worker_id IS NULL OR h.heartbeat_at IS NULL
                OR h.heartbeat_at < now() - make_interval(secs => $2::float8 / 1000))
         ORDER BY c.updated_at
         LIMIT $3
         FOR UPDATE OF c SKIP LOCKED`,
      { channel: "$5", instructionsKey: "$6" },
    ),
    [workerId, o.leaseMs, o.limit, o.ignoreLeases ?? false, CHAT_CHANNEL, INSTRUCTIONS_KEY],
  );
  return r.rows.map(toAcquired);
}

/**
 * Claims chat `chatId` for `workerId` inside the transaction `tx` that made it runnable (a
 * transition that started its turn, core.ts `LocalClaim`), if it is runnable and no runner
 * holds it. The claim's notification is the transition's: the caller sends no other. Answers
 * what its runner starts from, or undefined when there was nothing to claim.
 */
export async function claimIn(
  tx: Queryable,
  workerId: string,
  chatId: string,
): Promise<Acquired | undefined> {
  const r = await tx.query(
    claimSql(
      `SELECT c.id, c.worker_id AS previous_worker_id FROM chats c
         WHERE c.id = $2 AND c.status IN ('running', 'interrupting') AND NOT c.archived
           AND c.runner_id IS NULL
         FOR UPDATE OF c`,
      { channel: "$3", instructionsKey: "$4" },
    ),
    [workerId, chatId, CHAT_CHANNEL, INSTRUCTIONS_KEY],
  );
  return r.rows.length === 0 ? undefined : toAcquired(r.rows[0]!);
}

/** A claim's answer row as what its runner starts from. */
export function toAcquired(c: Record<string, unknown>): Acquired {
  const chat = rowToChat(c);
  const history =
    String(c.history_at) === chat.historyVersion ? messagesFromJson(c.history) : undefined;
  return {
    chatId: chat.id,
    runnerId: chat.runnerId!,
    previousWorkerId: (c.previous_worker_id as string | null) ?? null,
    chat,
    start: {
      history,
      snapshot: c.kept_snapshot
        ? { snapshot: c.kept_snapshot as ContextSnapshot, capturedAt: c.kept_at as Date }
        : null,
      access: accessOf(
        chat,
        c.owner_disabled === null
          ? undefined
          : {
              disabled: c.owner_disabled as boolean,
              shared: c.workspace_shared as boolean | null,
              owner_id: c.workspace_owner_id as string | null,
            },
      ),
      organization: instructionsOf(c.instructions as { text?: unknown } | null),
    },
  };
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
