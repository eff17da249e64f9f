// Whether a chat's owner may still use the chat's workspace. A chat is created only in its
// owner's own workspace or a shared one (the API's canUseWorkspace, which is `usableBy`), but a
// workspace can be unshared (or repointed, which unshares it) while another member's turn runs
// or waits in the queue. So the worker asks again right before it reaches the agent (each
// attempt of a tool batch, the first in the statement that commits the calls; a first context
// snapshot, in the claim's statement or in its own read; the wait for a template workspace
// applies `usableBy` to its own read), and a member who lost the workspace reaches it no more; an
// interrupt still does (it may stop what was started). A workspace that is gone, or a chat
// without one, is left to the tools to report.

import type { Chat } from "./chats.ts";
import type { Queryable } from "./db/index.ts";

/** The rule itself, for a workspace row: shared, or its owner's (a row without one: nobody's). */
export function usableBy(userId: string, row: { shared?: unknown; owner_id?: unknown }): boolean {
  return row.shared === true || (row.owner_id != null && row.owner_id === userId);
}

/**
 * The same rule in SQL, for the workspace row `w` (an alias) and the user `userId` (an SQL
 * expression).
 */
export function usableBySql(userId: string, w: string): string {
  return `(${w}.shared OR COALESCE(${w}.owner_id = ${userId}, false))`;
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
 * The read of the access row for the chat's owner and workspace (SQL expressions: parameters or
 * columns), and the same rule as accessOf in SQL over the read as `a`, for a statement that
 * writes only while the workspace is usable (batch-start.ts).
 */
export function accessRowSql(owner: string, workspace: string): string {
  return `SELECT u.disabled_at IS NOT NULL AS disabled, w.shared, w.owner_id
  FROM users u LEFT JOIN workspaces w ON w.id = ${workspace} WHERE u.id = ${owner}`;
}
export function accessLostSql(owner: string): string {
  return `a.disabled OR (a.shared IS NOT NULL AND NOT a.shared AND a.owner_id IS DISTINCT FROM ${owner})`;
}

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
  const r = await q.query<AccessRow>(accessRowSql("$1", "$2"), [chat.ownerId, chat.workspaceId]);
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
