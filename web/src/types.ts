// The API's shapes the UI reads (API.md), loosely: unknown fields are ignored. Message parts
// and live parts are the server's own types (type-only imports: nothing of the server ships).

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
