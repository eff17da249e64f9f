// The API's shapes the UI reads are the server's own types (type-only imports: nothing of the
// server ships to the browser), so a change on one side fails the type check of the other.

import type { ChatView, User } from "../../src/api/views.ts";

export type { LivePart, PartEvent } from "../../src/chatd/stream.ts";
/** A chat, a message and a message part (no billing records) as the API answers them. */
export type {
  ChatView as Chat,
  MessageView as Message,
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
