// Tool results (CHATD.md 6 and 7): JSON objects discriminated by `status`, so people, the UI
// and the model tell outcomes apart without parsing prose. Every result but a success carries
// a `note` saying what the model can do next; an `unknown` result always says why and how to check.

import type { ProcessInfo, ProcessTruncation } from "../../contract/index.ts";
import { plainOutput } from "./ansi.ts";

/** Why the outcome of a side effect is not known. */
export type UnknownReason =
  | "agent_started_after_tool_call"
  | "input_mismatch"
  | "agent_unreachable"
  | "agent_no_answer"
  | "agent_error"
  /** An agent without the contract: the interrupt could not ask what happened. */
  | "interrupted";

/** What each unknown reason means, in words the model reads. */
export const UNKNOWN_REASONS: Record<UnknownReason, string> = {
  agent_started_after_tool_call:
    "The workspace agent restarted after this call was made; it may or may not have run.",
  input_mismatch:
    "The workspace agent recorded a different request for this tool call; this one did not " +
    "run, but the recorded one may have.",
  agent_unreachable: "The workspace agent could not be reached; the call may or may not have run.",
  agent_no_answer:
    "The workspace agent did not answer in time; the request may have reached it, so the call " +
    "may or may not have run.",
  agent_error:
    "The workspace agent answered with an error while the call's outcome was being read; it " +
    "may or may not have finished.",
  interrupted:
    "The call was interrupted before it produced a result, and the workspace agent cannot " +
    "say what happened; it may have run.",
};

/** A tool that could not run at all (bad arguments, unknown tool, a read that failed). */
export interface ErrorResult {
  status: "error";
  message: string;
}

// ---- execute / process_output ----------------------------------------------------------

/** The process exited. */
export interface ProcessCompleted {
  status: "completed";
  /** The exit status; −1 when a signal ended the process. */
  exit_code: number;
  output: string;
  /** Set when the agent's output buffer dropped the middle of the output. */
  truncated?: ProcessTruncation;
}

export interface ExecuteCompleted extends ProcessCompleted {
  /** The process's run age when its exit was seen. */
  wall_duration_ms: number;
}

export interface TimedOutResult {
  status: "timed_out";
  process_id: string;
  /** The output so far. */
  output: string;
  truncated?: ProcessTruncation;
  note: string;
}

export interface BackgroundResult {
  status: "background";
  process_id: string;
  note: string;
}

export interface CanceledResult {
  status: "canceled";
  output: string;
  truncated?: ProcessTruncation;
  run_age_ms: number;
  note: string;
}

/**
 * Why a call was never sent, when it was not the user's interrupt (an interrupt's not_run and
 * not_applied carry no reason).
 */
export type NotSentReason = "workspace_unavailable";

export interface NotRunResult {
  status: "not_run";
  note: string;
  reason?: NotSentReason;
}

export interface UnknownProcessResult {
  status: "unknown";
  reason: UnknownReason;
  process_id: string;
  note: string;
  /** The underlying error, for people. */
  detail?: string;
}

export type ExecuteResult =
  | ExecuteCompleted
  | TimedOutResult
  | BackgroundResult
  | CanceledResult
  | NotRunResult
  | UnknownProcessResult
  | ErrorResult;

export type ProcessOutputResult = ProcessCompleted | TimedOutResult | ErrorResult;

export type ProcessListResult = { status: "completed"; processes: ProcessInfo[] } | ErrorResult;

export type ProcessSignalResult = { status: "completed"; message: string } | ErrorResult;

// ---- files -----------------------------------------------------------------------------

export interface FailedResult {
  status: "failed";
  /** The agent's error; nothing was applied. */
  error: string;
  note: string;
}

export interface NotAppliedResult {
  status: "not_applied";
  note: string;
  reason?: NotSentReason;
}

export interface UnknownFileResult {
  status: "unknown";
  reason: UnknownReason;
  note: string;
  detail?: string;
}

export type WriteFileResult =
  | { status: "applied"; message: string; path?: string }
  | FailedResult
  | NotAppliedResult
  | UnknownFileResult
  | ErrorResult;

export type EditFilesResult =
  | { status: "applied"; paths?: string[]; files?: { path: string; diff: string }[] }
  | FailedResult
  | NotAppliedResult
  | UnknownFileResult
  | ErrorResult;

export type ReadFileResult =
  | {
      status: "completed";
      kind: "file";
      path: string;
      /** `"<n>\t<line>"` lines joined with `\n`. */
      content: string;
      lines_read: number;
      total_lines: number;
      note?: string;
    }
  | {
      status: "completed";
      kind: "directory";
      path: string;
      entries: { name: string; is_dir: boolean }[];
    }
  | ErrorResult;

/** Every result of every tool. */
export type ToolResult =
  | ExecuteResult
  | ProcessOutputResult
  | ProcessListResult
  | ProcessSignalResult
  | ReadFileResult
  | WriteFileResult
  | EditFilesResult;

// ---- builders (also for the interrupt, CHATD.md 8) -------------------------------------

export function errorResult(message: string): ErrorResult {
  return { status: "error", message };
}

export function timedOutResult(
  processId: string,
  output: { output: string; truncated?: ProcessTruncation },
  why: string,
): TimedOutResult {
  const r: TimedOutResult = {
    status: "timed_out",
    process_id: processId,
    output: plainOutput(output.output),
    note:
      `${why} Read its output with process_output using process ID ${processId}, or ` +
      "stop it with process_signal.",
  };
  if (output.truncated) r.truncated = output.truncated;
  return r;
}

export function backgroundResult(processId: string): BackgroundResult {
  return {
    status: "background",
    process_id: processId,
    note:
      `Started in the background. Read its output with process_output using process ID ` +
      `${processId}; end it with process_signal.`,
  };
}

/** Killed by the user's interrupt after `runAgeMs`. */
export function canceledResult(
  output: { output: string; truncated?: ProcessTruncation },
  runAgeMs: number,
): CanceledResult {
  const r: CanceledResult = {
    status: "canceled",
    output: plainOutput(output.output),
    run_age_ms: Math.floor(runAgeMs),
    note:
      `Canceled by the user after ${(Math.max(0, runAgeMs) / 1000).toFixed(1)} s: the command ` +
      "was killed; the output is what it printed until then.",
  };
  if (output.truncated) r.truncated = output.truncated;
  return r;
}

export function notRunResult(): NotRunResult {
  return {
    status: "not_run",
    note: "The user interrupted before the command reached the workspace; it did not run.",
  };
}

export function notAppliedResult(): NotAppliedResult {
  return {
    status: "not_applied",
    note: "The user interrupted before the change reached the workspace; nothing was applied.",
  };
}

/**
 * A call never sent because the chat's owner may no longer use the workspace (`why`: a sentence
 * saying so): not_applied for a change, not_run for everything else. The turn ends with it.
 */
export function workspaceUnavailableResult(
  toolName: string,
  why: string,
): NotRunResult | NotAppliedResult {
  return toolName === "write_file" || toolName === "edit_files"
    ? {
        status: "not_applied",
        reason: "workspace_unavailable",
        note: `${why} The change was not sent to the workspace: nothing was applied, and the turn ended.`,
      }
    : {
        status: "not_run",
        reason: "workspace_unavailable",
        note: `${why} The call was not sent to the workspace: it did not run, and the turn ended.`,
      };
}

export function unknownProcessResult(
  reason: UnknownReason,
  processId: string,
  detail?: string,
): UnknownProcessResult {
  const next =
    reason === "agent_started_after_tool_call"
      ? "A restart stops the processes the agent ran, so check the command's effects (files, " +
        "process_list) before running it again."
      : `Check it with process_output using process ID ${processId} before running it again.`;
  const r: UnknownProcessResult = {
    status: "unknown",
    reason,
    process_id: processId,
    note: `${UNKNOWN_REASONS[reason]} ${next}`,
  };
  if (detail !== undefined) r.detail = detail;
  return r;
}

export function unknownFileResult(reason: UnknownReason, detail?: string): UnknownFileResult {
  const r: UnknownFileResult = {
    status: "unknown",
    reason,
    note:
      `${UNKNOWN_REASONS[reason]} The change may have been applied: check the file with ` +
      "read_file before changing it again.",
  };
  if (detail !== undefined) r.detail = detail;
  return r;
}

export function failedResult(error: string, tool: "write_file" | "edit_files"): FailedResult {
  return {
    status: "failed",
    error,
    note:
      tool === "edit_files"
        ? "Nothing was applied. Fix the edits (read the file first if unsure) and call edit_files again."
        : "Nothing was written. Fix the request and call write_file again.",
  };
}
