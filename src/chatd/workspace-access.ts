// Whether a chat's owner may still use the chat's workspace. A chat is created only in its
// owner's own workspace or a shared one (the API's canUseWorkspace, which is `usableBy`), but a
// workspace can be unshared (or repointed, which unshares it) while another member's turn runs
// or waits in the queue. So the worker asks again right before it reaches the agent (each
// attempt of a tool batch, a first context snapshot; the wait for a template workspace applies
// `usableBy` to its own read), and a member who lost the workspace reaches it no more; an
// interrupt still does (it may stop what was started). A workspace that is gone, or a chat
// without one, is left to the tools to report.

import type { Logger } from "pino";
import { batchMessages } from "./batch.ts";
import type { Chat, Fence } from "./chats.ts";
import type { Database, Queryable } from "./db/index.ts";
import type { ToolCallPart } from "./messages.ts";
import { workspaceUnavailableResult } from "./tools/index.ts";
import { finishError, type HeldChat } from "./transitions/index.ts";

/** The rule itself, for a workspace row: shared, or its owner's (a row without one: nobody's). */
export function usableBy(userId: string, row: { shared?: unknown; owner_id?: unknown }): boolean {
  return row.shared === true || (row.owner_id != null && row.owner_id === userId);
}

export type WorkspaceAccess =
  | { status: "usable" }
  /** `unshared`: the workspace is neither shared nor the owner's; `owner_disabled`: the owner is. */
  | { status: "lost"; why: "unshared" | "owner_disabled" };

const USABLE: WorkspaceAccess = { status: "usable" };

/** What the access is decided from: the owner's row joined with the workspace's (if any). */
export type AccessRow = {
  disabled: boolean;
  shared: boolean | null;
  owner_id: string | null;
};

/**
 * The read of the access row, for the chat's owner `$1` and workspace `$2`, and the same rule
 * as accessOf in SQL (`ACCESS_LOST_SQL`, over the read as `a`), for a statement that writes
 * only while the workspace is usable (batch-start.ts).
 */
export const ACCESS_ROW_SQL = `SELECT u.disabled_at IS NOT NULL AS disabled, w.shared, w.owner_id
  FROM users u LEFT JOIN workspaces w ON w.id = $2 WHERE u.id = $1`;
export const ACCESS_LOST_SQL =
  "a.disabled OR (a.shared IS NOT NULL AND NOT a.shared AND a.owner_id IS DISTINCT FROM $1)";

/** The chat's owner's access, from the access row (undefined: no such owner). */
export function accessOf(chat: Chat, row: AccessRow | undefined): WorkspaceAccess {
  if (chat.workspaceId === null) return USABLE;
  if (!row) return USABLE; // no such owner: the chat is going with them (ON DELETE CASCADE)
  if (row.disabled) return { status: "lost", why: "owner_disabled" };
  if (row.shared === null) return USABLE; // the workspace is gone: the tools say so
  return usableBy(chat.ownerId, row) ? USABLE : { status: "lost", why: "unshared" };
}

/**
 * The chat's owner's access to the chat's workspace now: one read by primary keys (none for a
 * chat without a workspace).
 */
export async function workspaceAccess(q: Queryable, chat: Chat): Promise<WorkspaceAccess> {
  if (chat.workspaceId === null) return USABLE;
  const r = await q.query<AccessRow>(ACCESS_ROW_SQL, [chat.ownerId, chat.workspaceId]);
  return accessOf(chat, r.rows[0]);
}

/** Why, in words for the model (a tool result's note) and for people (last_error). */
export function lostWorkspaceWords(why: "unshared" | "owner_disabled"): {
  /** The first sentence of a refused call's note. */
  note: string;
  /** The chat's last_error. */
  error: { message: string; detail: string };
} {
  return why === "owner_disabled"
    ? {
        note: "The chat's owner is disabled, so the workspace is no longer available to the chat.",
        error: {
          message: "The chat's owner is disabled, so the chat stopped before its next tool call.",
          detail:
            "An admin can enable the user again; nothing more runs in the workspace until then.",
        },
      }
    : {
        note:
          "The workspace is no longer available to the chat's owner: it is not shared with " +
          "them any more.",
        error: {
          message:
            "The chat's workspace is no longer shared with you, so the chat stopped before its " +
            "next tool call.",
          detail: "Start a new chat on a workspace of your own, or ask an admin to share it again.",
        },
      };
}

/**
 * The chat's owner may no longer use its workspace: no call of the batch is sent, each gets a
 * result saying why, and the turn ends in error with them, in one transaction (fenced: a stale
 * task writes nothing).
 */
export async function refuseBatch(
  deps: { db: Database; log: Logger; toolResultBudgetBytes: number; held?: HeldChat },
  fence: Fence,
  chat: Chat,
  calls: ToolCallPart[],
  why: "unshared" | "owner_disabled",
): Promise<void> {
  const words = lostWorkspaceWords(why);
  const results = calls.map((c) => workspaceUnavailableResult(c.toolName, words.note));
  deps.log.warn(
    { chat_id: chat.id, workspace_id: chat.workspaceId, calls: calls.length, why },
    "tool calls not sent: the workspace is no longer available to the chat's owner",
  );
  const messages = batchMessages(
    calls,
    results,
    deps.toolResultBudgetBytes,
    calls.map(() => undefined),
  );
  await finishError(deps.db, fence, words.error, messages, deps.held);
}
