// The API's shapes the UI reads are the server's own types (type-only imports: nothing of the
// server ships to the browser), so a change on one side fails the type check of the other.

import type { z } from "zod";
import type { ModelPatch, NewModelBody } from "../../src/api/models.ts";
import type { NewTokenBody } from "../../src/api/tokens.ts";
import type { NewUserBody, PasswordChange, UserPatch } from "../../src/api/users.ts";
import type { ChatView, User } from "../../src/api/views.ts";
import type { NewWorkspaceBody, WorkspacePatch } from "../../src/api/workspaces.ts";

export type { LivePart, PartEvent } from "../../src/chatd/stream.ts";
/** A chat, a message and a message part (no billing records) as the API answers them. */
export type {
  ChatView as Chat,
  MessageView as Message,
  QueuedView as Queued,
  User,
  VisiblePart as Part,
} from "../../src/api/views.ts";
/** A chat's (or a report row's) usage totals. */
export type { ChatUsage as Usage } from "../../src/api/usage.ts";

export type ChatStatus = ChatView["status"];

/** Owners and admins run the place: users, models, workspaces, the audit log. */
export function isStaff(u: User): boolean {
  return u.role === "owner" || u.role === "admin";
}

// The admin pages' shapes, the server's own (type-only: nothing of the server ships).
export type {
  AuditEntryView as AuditLogEntry,
  ModelView,
  TokenView as Token,
  WorkspaceHealth,
  WorkspaceView,
} from "../../src/api/views.ts";
export type { ProviderName } from "../../src/model/registry.ts";
/** Request bodies as the server's schemas accept them. */
export type NewModel = z.input<typeof NewModelBody>;
export type ModelChange = z.input<typeof ModelPatch>;
export type NewUser = z.input<typeof NewUserBody>;
export type UserChange = z.input<typeof UserPatch>;
export type PasswordChangeBody = z.input<typeof PasswordChange>;
export type NewWorkspace = z.input<typeof NewWorkspaceBody>;
export type WorkspaceChange = z.input<typeof WorkspacePatch>;
export type NewToken = z.input<typeof NewTokenBody>;

/** `POST /tokens`: the secret, answered this once. */
export interface IssuedToken {
  id: string;
  token: string;
}
