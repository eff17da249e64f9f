// The API's shapes the UI reads (API.md), loosely: unknown fields are ignored.

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

export type Part =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "tool-call"; tool_call_id: string; tool_name: string; args: unknown }
  | {
      type: "tool-result";
      tool_call_id: string;
      tool_name: string;
      result: unknown;
      is_error: boolean;
    };

export interface Message {
  id: string;
  role: "user" | "assistant" | "tool" | "system";
  parts: Part[];
  created_at: string;
  runtime_ms?: number;
}

export type LivePart =
  | { type: "text-delta"; text: string }
  | { type: "reasoning-delta"; text: string }
  | { type: "tool-call"; tool_call_id: string; tool_name: string; args: unknown }
  | { type: "tool-started"; tool_call_id: string; tool_name: string }
  | { type: "tool-finished"; tool_call_id: string; tool_name: string; status: string };

export interface PartEvent {
  history_version: string;
  generation_attempt: number;
  seq: number;
  part: LivePart;
}

export interface Usage {
  runtime_ms: number;
  model_runtime_ms: number;
  tool_runtime_ms: number;
  billed_calls: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
}

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
