// A chat's change notification (CHATD.md 3): the channel, the payload every transition sends
// on commit (built by the database from the chat's new row), and the same change told without
// a notification.

import type { Chat } from "../chats.ts";

/** LISTEN/NOTIFY channel of chat changes; the payload is a JSON {@link ChatChange}. */
export const CHAT_CHANNEL = "tether_chats";

export interface ChatChange {
  chat_id: string;
  snapshot_version: string;
  history_version: string;
  status: Chat["status"];
  runner_id: string | null;
  // What a chat's event stream shows besides messages, so it need not read the chat for a
  // change (absent from a payload of an older server: the stream reads the chat then).
  worker_id?: string | null;
  generation_attempt?: number;
  /** Whether a retry state is recorded (the stream reads the chat to show it). */
  retry_state?: boolean;
}

/**
 * The change notification's payload, built by the database from the row as `alias` (a table or
 * CTE holding the chat's new row): the same text whatever the statement that sends it.
 */
export function changePayloadSql(alias: string): string {
  return `json_build_object('chat_id', ${alias}.id, 'snapshot_version', ${alias}.snapshot_version::text,
    'history_version', ${alias}.history_version::text, 'status', ${alias}.status,
    'runner_id', ${alias}.runner_id, 'worker_id', ${alias}.worker_id,
    'generation_attempt', ${alias}.generation_attempt,
    'retry_state', ${alias}.retry_state IS NOT NULL)::text`;
}

/**
 * A CTE `n` that notifies the change of each row of `alias`, and the answer column that makes it
 * run: a CTE that only reads runs only if the statement's answer reads it.
 */
export function notifySql(channel: string, alias: string): { cte: string; answer: string } {
  return {
    cte: `n AS (SELECT pg_notify(${channel}, ${changePayloadSql(alias)}) FROM ${alias})`,
    answer: "(SELECT count(*) FROM n) AS notified",
  };
}

/** The change of a chat row, as changePayloadSql builds it: for a change told without a notification. */
export function changeOf(chat: Chat): ChatChange {
  return {
    chat_id: chat.id,
    snapshot_version: chat.snapshotVersion,
    history_version: chat.historyVersion,
    status: chat.status,
    runner_id: chat.runnerId,
    worker_id: chat.workerId,
    generation_attempt: chat.generationAttempt,
    retry_state: chat.retryState !== null,
  };
}
