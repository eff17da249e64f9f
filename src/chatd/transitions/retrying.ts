// A chat's `retrying` (issue 14): while a task of the chat keeps failing, the worker records
// each failure in chats.retry_state, and readers see how many attempts failed in a row, the
// last failure in a short sentence and when the next attempt starts. A record belongs to one
// task — the status and history it was made at — so one left over from an earlier task (the
// history moved, the user interrupted) is never shown.

import type { Chat } from "../chats.ts";

/** What `GET /api/v1/chats/{id}` answers in `retrying`. */
export interface Retrying {
  /** How many attempts of the current task failed in a row (1 after the first failure). */
  attempt: number;
  /** The last failure, in a short sentence (never a key or the conversation). */
  last_error: string;
  /** When the next attempt starts (ISO 8601, the database's clock). */
  next_attempt_at: string;
}

/** chats.retry_state as the worker writes it (recordRetryState). */
interface RetryStateRow {
  status: string;
  history_version: string;
  attempt: number;
  last_error: string;
  next_attempt_at: string;
}

function isRetryStateRow(v: unknown): v is RetryStateRow {
  if (typeof v !== "object" || v === null) return false;
  const r = v as Record<string, unknown>;
  return (
    typeof r.status === "string" &&
    typeof r.history_version === "string" &&
    typeof r.attempt === "number" &&
    typeof r.last_error === "string" &&
    typeof r.next_attempt_at === "string"
  );
}

/** The chat's `retrying`, or null when its current task is not failing. */
export function retryingOf(
  chat: Pick<Chat, "status" | "historyVersion" | "retryState">,
): Retrying | null {
  const s = chat.retryState;
  if (chat.status !== "running" && chat.status !== "interrupting") return null;
  if (!isRetryStateRow(s) || s.status !== chat.status || s.history_version !== chat.historyVersion)
    return null;
  const at = new Date(s.next_attempt_at);
  if (Number.isNaN(at.getTime())) return null;
  return { attempt: s.attempt, last_error: s.last_error, next_attempt_at: at.toISOString() };
}
