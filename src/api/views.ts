// The JSON shapes the API answers, one function per resource. Secrets (password hashes, token
// hashes, agent tokens, model API keys) have no field here, so no route can leak them; message
// IDs stay decimal strings and the billing record never reaches a message's parts.

import type { Chat } from "../chatd/chats.ts";
import { withoutCredentials } from "./agent-url.ts";
import { retryingOf, type QueuedMessage, type Retrying } from "../chatd/transitions/index.ts";
import type { AuditAction } from "./audit.ts";
import type { ContextView } from "../chatd/prompt/index.ts";
import {
  isUsagePart,
  type ChatMessage,
  type MessagePart,
  type UsagePart,
} from "../chatd/messages.ts";
import type { ProcessInfo, ProcessOutputResponse } from "../contract/index.ts";

export interface User {
  id: string;
  email: string;
  name: string;
  role: "owner" | "admin" | "member";
  /** A disabled user cannot sign in and has no tokens (PATCH /api/v1/users/{id}). */
  disabled: boolean;
  created_at: string;
}

export function rowToUser(r: Record<string, unknown>): User {
  return {
    id: r.id as string,
    email: r.email as string,
    name: r.name as string,
    role: r.role as User["role"],
    disabled: r.disabled_at !== null && r.disabled_at !== undefined,
    created_at: (r.created_at as Date).toISOString(),
  };
}

export interface ChatView {
  id: string;
  status: Chat["status"];
  title: string;
  workspace_id: string | null;
  model_id: string | null;
  created_at: string;
  updated_at: string;
  /** Hidden from the chat list (its owner "deleted" it); a new message brings it back. */
  archived: boolean;
  last_error?: { message: string; detail?: string };
  /**
   * While the chat's current task keeps failing (the model, an agent): how many attempts failed
   * in a row, the last failure in words, and when the next attempt starts; null otherwise.
   */
  retrying: Retrying | null;
  /**
   * `GET /chats/{id}` only: the chat's context snapshot (its instruction files' paths and sizes,
   * when it was taken), null before its first model step.
   */
  context?: ContextView | null;
}

export function chatView(c: Chat): ChatView {
  const v: ChatView = {
    id: c.id,
    status: c.status,
    title: c.title,
    workspace_id: c.workspaceId,
    model_id: c.modelConfigId,
    created_at: c.createdAt.toISOString(),
    updated_at: c.updatedAt.toISOString(),
    retrying: retryingOf(c),
    archived: c.archived,
  };
  if (c.lastError) v.last_error = c.lastError;
  return v;
}

/** The parts a person sees: everything but the usage records' (CHATD.md 9). */
export type VisiblePart = Exclude<MessagePart, UsagePart>;

const visible = (p: MessagePart): p is VisiblePart => !isUsagePart(p);

export interface MessageView {
  id: string;
  role: ChatMessage["role"];
  parts: VisiblePart[];
  created_at: string;
  runtime_ms?: number;
  /** A compaction boundary: the model's prompt starts at the latest one (its part: `compaction`). */
  boundary?: true;
}

export function messageView(m: ChatMessage): MessageView {
  const v: MessageView = {
    id: m.id,
    role: m.role,
    parts: m.content.filter(visible),
    created_at: m.createdAt.toISOString(),
  };
  if (m.runtimeMs > 0) v.runtime_ms = m.runtimeMs;
  if (m.boundary) v.boundary = true;
  return v;
}

/** Which messages a person sees, as SQL over chat_messages' columns: visibility user or both, not deleted. */
export const VISIBLE_MESSAGE_SQL = "NOT deleted AND visibility IN ('user', 'both')";

/** VISIBLE_MESSAGE_SQL for a message in hand (`deleted` absent: it is not). */
export function isVisibleMessage(m: {
  visibility: ChatMessage["visibility"];
  deleted?: boolean;
}): boolean {
  return m.deleted !== true && (m.visibility === "user" || m.visibility === "both");
}

/** The messages a person sees of chat `$1` after ID `$2`, in ID order. */
export const VISIBLE_MESSAGES_SQL = `SELECT * FROM chat_messages
  WHERE chat_id = $1 AND id > $2 AND ${VISIBLE_MESSAGE_SQL} ORDER BY id`;

export interface WorkspaceView {
  id: string;
  name: string;
  /** Null for a workspace whose agent dials out (`tether agent --server`). */
  agent_url: string | null;
  owner_id: string | null;
  is_default: boolean;
  shared: boolean;
  created_at: string;
  /** The agent's answer to `GET /api/v0/info` (checked when listed or read). */
  health?: WorkspaceHealth;
  /** Whether the agent is connected: a dial-out agent to a replica, a URL's agent answering. */
  agent?: { connected: boolean };
}

export interface WorkspaceHealth {
  reachable: boolean;
  version?: string;
  uptime_ms?: number;
  checked_at: string;
}

export function workspaceView(r: Record<string, unknown>): WorkspaceView {
  return {
    id: r.id as string,
    name: r.name as string,
    // Credentials are refused on the way in; any stored before that never leave.
    agent_url: r.agent_url === null ? null : withoutCredentials(r.agent_url as string),
    owner_id: (r.owner_id as string | null) ?? null,
    is_default: r.is_default as boolean,
    shared: r.shared as boolean,
    created_at: (r.created_at as Date).toISOString(),
  };
}

/** A process as the agent lists it (CONTRACT.md 7, ProcessInfo). */
export type ProcessView = ProcessInfo;

/** A process's output as the agent reads it without waiting (CONTRACT.md 7). */
export type ProcessOutputView = ProcessOutputResponse;

// The agent's answers are copied field by field: whatever else an agent sends is not passed on.

export function processView(p: ProcessInfo): ProcessView {
  const v: ProcessView = {
    id: p.id,
    command: p.command,
    background: p.background,
    running: p.running,
    started_at_unix: p.started_at_unix,
  };
  if (p.workdir !== undefined) v.workdir = p.workdir;
  if (p.exit_code !== undefined) v.exit_code = p.exit_code;
  if (p.exited_at_unix !== undefined) v.exited_at_unix = p.exited_at_unix;
  return v;
}

export function processOutputView(o: ProcessOutputResponse): ProcessOutputView {
  const v: ProcessOutputView = { output: o.output, running: o.running };
  if (o.truncated !== undefined) v.truncated = o.truncated;
  if (o.exit_code !== undefined) v.exit_code = o.exit_code;
  if (o.command !== undefined) v.command = o.command;
  return v;
}

export interface ModelView {
  id: string;
  provider: string;
  model: string;
  base_url: string | null;
  context_limit: number | null;
  /** Compaction threshold, percent of the context limit; null = the default (70). */
  compact_threshold_percent: number | null;
  is_default: boolean;
  enabled: boolean;
  /** Integer micro-dollars per million tokens. */
  input_price_per_mtok_micros: number;
  output_price_per_mtok_micros: number;
  /** Whether a key is stored; the key itself is never answered. */
  has_api_key: boolean;
  created_at: string;
  updated_at: string;
}

export function modelView(r: Record<string, unknown>): ModelView {
  return {
    id: r.id as string,
    provider: r.provider as string,
    model: r.model as string,
    base_url: (r.base_url as string | null) ?? null,
    context_limit: (r.context_limit as number | null) ?? null,
    compact_threshold_percent: (r.compact_threshold_percent as number | null) ?? null,
    is_default: r.is_default as boolean,
    enabled: r.enabled as boolean,
    input_price_per_mtok_micros: Number(r.input_price_per_mtok_micros),
    output_price_per_mtok_micros: Number(r.output_price_per_mtok_micros),
    has_api_key: r.api_key !== null && r.api_key !== undefined,
    created_at: (r.created_at as Date).toISOString(),
    updated_at: (r.updated_at as Date).toISOString(),
  };
}

export interface TokenView {
  id: string;
  name: string;
  kind: "api" | "session";
  created_at: string;
  last_used_at: string | null;
  /** When an API token stops working (null: never; a session ends when idle instead). */
  expires_at: string | null;
  /** The token the request that lists them came with (this browser's session, say). */
  current: boolean;
}

export function tokenView(r: Record<string, unknown>, currentTokenId: string): TokenView {
  return {
    id: r.id as string,
    name: r.name as string,
    kind: r.kind as TokenView["kind"],
    created_at: (r.created_at as Date).toISOString(),
    last_used_at: (r.last_used_at as Date | null)?.toISOString() ?? null,
    expires_at: (r.expires_at as Date | null)?.toISOString() ?? null,
    current: r.id === currentTokenId,
  };
}

export interface AuditEntryView {
  id: string;
  user_id: string | null;
  action: AuditAction;
  target: string | null;
  details: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
  created_at: string;
}

export function auditEntryView(r: Record<string, unknown>): AuditEntryView {
  return {
    id: String(r.id),
    user_id: (r.user_id as string | null) ?? null,
    action: r.action as AuditAction,
    target: (r.target as string | null) ?? null,
    details: r.details as Record<string, unknown>,
    ip: (r.ip as string | null) ?? null,
    user_agent: (r.user_agent as string | null) ?? null,
    created_at: (r.created_at as Date).toISOString(),
  };
}

/** A message waiting in a chat's queue (`edit_of`: the message it replaces, for an edit). */
export interface QueuedView {
  id: string;
  parts: VisiblePart[];
  created_by: string | null;
  created_at: string;
  edit_of: string | null;
}

export function queuedView(m: QueuedMessage): QueuedView {
  return {
    id: m.id,
    parts: m.content.filter(visible),
    created_by: m.createdBy,
    created_at: m.createdAt.toISOString(),
    edit_of: m.editOf,
  };
}
