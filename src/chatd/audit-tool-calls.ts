// The audit log's record of tool calls: when the worker sends a batch to a workspace agent, one
// `tool.call` entry per call — the chat's owner (the model acts for them), the chat, the tool
// and what it acts on (the command of an execute, the path of a file tool, the process of a
// process tool), never file contents. A batch that runs again (a retried or taken-over task)
// is recorded again: each entry is a time the server sent the call, which the agent then ran
// at most once. What a model wrote may hold anything, so every text is cut to a bound and made
// storable (storable-text.ts): an entry can never fail the batch.

import type { ToolCallPart } from "./messages.ts";
import { toStorableText } from "./storable-text.ts";

/** The longest command or path recorded; a longer one is cut and marked `…`. */
export const AUDIT_TEXT_MAX_CHARS = 2_000;
/** At most this many paths of one edit_files call are recorded. */
const AUDIT_MAX_PATHS = 50;

function text(v: unknown): string | undefined {
  if (typeof v !== "string") return undefined;
  const s = toStorableText(v);
  return s.length > AUDIT_TEXT_MAX_CHARS ? `${s.slice(0, AUDIT_TEXT_MAX_CHARS)}…` : s;
}

/** What a call acts on, by tool: its command, path(s) or process; nothing for unknown tools. */
export function toolCallTarget(call: ToolCallPart): Record<string, unknown> {
  const args = (typeof call.args === "object" && call.args !== null ? call.args : {}) as Record<
    string,
    unknown
  >;
  const out: Record<string, unknown> = {};
  const set = (key: string, v: unknown) => {
    const t = text(v);
    if (t !== undefined) out[key] = t;
  };
  switch (call.toolName) {
    case "execute":
      set("command", args.command);
      set("workdir", args.workdir);
      if (args.background === true) out.background = true;
      break;
    case "read_file":
    case "write_file":
      set("path", args.path);
      break;
    case "edit_files":
      if (Array.isArray(args.files)) {
        out.paths = args.files
          .slice(0, AUDIT_MAX_PATHS)
          .map((f) => text((f as Record<string, unknown> | null)?.path))
          .filter((p) => p !== undefined);
      }
      break;
    case "process_output":
    case "process_signal":
      set("process_id", args.process_id);
      if (call.toolName === "process_signal") set("signal", args.signal);
      break;
    default:
      break;
  }
  return out;
}

/**
 * The `details` (JSON text) of each call's `tool.call` entry, but its `message_id`: the entries
 * are written by the batch's start (batch-start.ts), which adds the ID of the message holding
 * the calls, with the chat's owner as the user and the chat as the target.
 */
export function toolCallAuditDetails(calls: ToolCallPart[]): string[] {
  return calls.map((c) =>
    JSON.stringify({
      tool: toStorableText(c.toolName).slice(0, 200),
      tool_call_id: toStorableText(c.toolCallId).slice(0, 200),
      ...toolCallTarget(c),
    }),
  );
}
