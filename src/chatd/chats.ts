// The chat row (CHATD.md 2) as chatd reads it, and the fence a task holds: a task may read
// or write a chat only while it still owns it with the status and history it started from.

export type ChatStatus = "waiting" | "running" | "interrupting" | "error";

export interface Chat {
  id: string;
  ownerId: string;
  workspaceId: string | null;
  modelConfigId: string | null;
  title: string;
  status: ChatStatus;
  archived: boolean;
  workerId: string | null;
  runnerId: string | null;
  /** int64 counters as decimal strings (exact). */
  snapshotVersion: string;
  historyVersion: string;
  queueVersion: string;
  generationAttempt: number;
  retryState: unknown;
  lastError: { message: string; detail?: string } | null;
  /** A compaction was asked for: the chat's next action is one (docs/prompt.md). */
  compactRequested: boolean;
  createdAt: Date;
  updatedAt: Date;
}

const TITLE_CHARS = 50;

/**
 * A chat's title from its first message: the first non-empty line without a leading Markdown
 * marker (`# `, `> `, `- `), cut at a word near 50 characters (short enough for a list and a
 * browser tab).
 */
export function titleOf(text: string): string {
  const first = (text.split("\n").find((l) => l.trim() !== "") ?? "").trim();
  const line = first.replace(/^(?:#{1,6}|>|[-*+])\s+/, "").trim() || first;
  if (line.length <= TITLE_CHARS) return line;
  const cut = line.slice(0, TITLE_CHARS);
  const space = cut.lastIndexOf(" ");
  return `${space > TITLE_CHARS / 2 ? cut.slice(0, space) : cut}…`;
}

export function rowToChat(r: Record<string, unknown>): Chat {
  return {
    id: r.id as string,
    ownerId: r.owner_id as string,
    workspaceId: (r.workspace_id as string | null) ?? null,
    modelConfigId: (r.model_config_id as string | null) ?? null,
    title: r.title as string,
    status: r.status as ChatStatus,
    archived: r.archived as boolean,
    workerId: (r.worker_id as string | null) ?? null,
    runnerId: (r.runner_id as string | null) ?? null,
    snapshotVersion: r.snapshot_version as string,
    historyVersion: r.history_version as string,
    queueVersion: r.queue_version as string,
    generationAttempt: r.generation_attempt as number,
    retryState: r.retry_state ?? null,
    lastError: (r.last_error as Chat["lastError"]) ?? null,
    compactRequested: r.compact_requested === true,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}

/** What a task was started from; every task read and write checks it under the row lock. */
export interface Fence {
  chatId: string;
  workerId: string;
  runnerId: string;
  status: ChatStatus;
  historyVersion: string;
  /** Checked by terminal generation writes only. */
  generationAttempt?: number;
}

/** A stale task: its chat changed hands, status or history. An expected exit, never retried. */
export class FenceError extends Error {
  override readonly name = "FenceError";
}

export class ChatNotFoundError extends Error {
  override readonly name = "ChatNotFoundError";
  constructor(readonly chatId: string) {
    super(`Chat ${chatId} not found.`);
  }
}

/**
 * A new chat names what its owner cannot have: a workspace that is not theirs to use (or is
 * gone), or a model config that is unknown or disabled. Nothing was written.
 */
export class ChatRefusedError extends Error {
  override readonly name = "ChatRefusedError";
  constructor(
    readonly field: "workspace_id" | "model_id",
    readonly id: string,
  ) {
    super(
      field === "workspace_id"
        ? `Workspace ${id} is not one the chat's owner may use.`
        : `Model config ${id} is unknown or disabled.`,
    );
  }
}

/** An edit names a message that is not one of the chat's user messages in its history. */
export class MessageNotEditableError extends Error {
  override readonly name = "MessageNotEditableError";
  constructor(
    readonly messageId: string,
    readonly reason: "not_found" | "not_user_message",
  ) {
    super(
      reason === "not_found"
        ? `Message ${messageId} is not in the chat's history.`
        : `Message ${messageId} is not a user message; only user messages can be edited.`,
    );
  }
}

/** Throws FenceError unless `chat` still matches `fence`. */
export function checkFence(chat: Chat, fence: Fence): void {
  const why =
    chat.workerId !== fence.workerId || chat.runnerId !== fence.runnerId
      ? "the chat is owned by another runner"
      : chat.status !== fence.status
        ? `the chat is ${chat.status}, not ${fence.status}`
        : chat.historyVersion !== fence.historyVersion
          ? "the chat's history changed"
          : fence.generationAttempt !== undefined &&
              chat.generationAttempt !== fence.generationAttempt
            ? "another generation attempt started"
            : undefined;
  if (why) throw new FenceError(`Stale task for chat ${fence.chatId}: ${why}.`);
}
