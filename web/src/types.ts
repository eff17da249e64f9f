// The API's shapes the UI reads (API.md), loosely: unknown fields are ignored. Message parts
// and live parts are the server's own types (type-only imports: nothing of the server ships).

import type { z } from "zod";
import type { AuditAction } from "../../src/api/audit.ts";
import type { ModelPatch, NewModelBody } from "../../src/api/models.ts";
import type { NewTokenBody } from "../../src/api/tokens.ts";
import type { NewUserBody, UserPatch } from "../../src/api/users.ts";
import type { NewWorkspaceBody, WorkspacePatch } from "../../src/api/workspaces.ts";
import type { MessagePart } from "../../src/chatd/messages.ts";
export type { LivePart, PartEvent } from "../../src/chatd/stream.ts";

/** A message part as the API lists it (billing records never reach the API). */
export type Part = Exclude<MessagePart, { type: "tool-batch-usage" }>;

export type ChatStatus = "waiting" | "running" | "interrupting" | "error";

export interface Chat {
  id: string;
  status: ChatStatus;
  title: string;
  workspace_id: string | null;
  model_id: string | null;
  created_at: string;
  updated_at: string;
  last_error?: string;
}

export interface Message {
  id: string;
  role: "user" | "assistant" | "tool" | "system";
  parts: Part[];
  created_at: string;
  runtime_ms?: number;
}

/** A chat's (or a report row's) usage totals, as the server defines them. */
export type { ChatUsage as Usage } from "../../src/api/usage.ts";

export interface User {
  id: string;
  email: string;
  name: string;
  role: "owner" | "admin" | "member";
}

/** Owners and admins run the place: users, models, workspaces, the audit log. */
export function isStaff(u: User): boolean {
  return u.role === "owner" || u.role === "admin";
}

// The admin pages' shapes, the server's own (type-only: nothing of the server ships).
export type {
  ModelView,
  User as UserView,
  WorkspaceHealth,
  WorkspaceView,
} from "../../src/api/views.ts";
export type { ProviderName } from "../../src/model/registry.ts";
/** Request bodies as the server's schemas accept them. */
export type NewModel = z.input<typeof NewModelBody>;
export type ModelChange = z.input<typeof ModelPatch>;
export type NewUser = z.input<typeof NewUserBody>;
export type UserChange = z.input<typeof UserPatch>;
export type NewWorkspace = z.input<typeof NewWorkspaceBody>;
export type WorkspaceChange = z.input<typeof WorkspacePatch>;
export type NewToken = z.input<typeof NewTokenBody>;

/** One API token of the caller's (`GET /tokens`; the server declares no type for it). */
export interface Token {
  id: string;
  name: string;
  kind: "api" | "session";
  created_at: string;
  last_used_at: string | null;
}

/** `POST /tokens`: the secret, answered this once. */
export interface IssuedToken {
  id: string;
  token: string;
}

/** One audit log entry (`GET /audit`, newest first; the server declares no type for it). */
export interface AuditLogEntry {
  id: string;
  user_id: string | null;
  action: AuditAction;
  target: string | null;
  details: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
  created_at: string;
}
