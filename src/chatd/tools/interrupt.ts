// The interrupt's result for one unresolved tool call (CHATD.md 8 step 3, and 7): a call that
// sends tool call headers gets one CancelToolCall, bounded by the agent answer timeout, and
// its answer becomes the real outcome; a read-only call gets no cancel and says so.

import {
  AgentHttpError,
  assertNever,
  type CancelToolCallResponse,
  type ToolCallProcess,
} from "../../contract/index.ts";
import { plainOutput } from "./ansi.ts";
import { absolutePath, resending, toolCallOf, uuidOf, type ToolContext } from "./context.ts";
import { TOOL_INPUTS, TOOL_NAMES, isToolName } from "./declarations.ts";
import { formatDuration, parseDuration } from "./duration.ts";
import { StaleToolCallError, WorkspaceRefusedError, classifyAgentError } from "./failures.ts";
import {
  backgroundResult,
  canceledResult,
  errorResult,
  failedResult,
  notAppliedResult,
  notRunResult,
  timedOutResult,
  unknownFileResult,
  unknownProcessResult,
  type ExecuteCompleted,
  type ToolResult,
} from "./results.ts";
import type { ToolCallRequest } from "./run.ts";

const DEFAULT_EXECUTE_TIMEOUT_MS = 10_000;

export interface InterruptOptions {
  /** Told the cancel answer's outcome, for billing: false when the call never reached the agent. */
  onStarted?: (started: boolean) => void;
}

/** What the cancel asks and how its answer is read, per tool. */
type Target =
  | { tool: "execute"; background: boolean; timeoutMs: number }
  | { tool: "write_file" | "edit_files"; paths: string[] };

/**
 * The result of one unresolved call of an interrupted batch. Throws only the task signal's
 * reason (the interrupt task stopped waiting) or an error that is not the agent's (a bug).
 */
export async function interruptResult(
  ctx: ToolContext,
  call: ToolCallRequest,
  o: InterruptOptions = {},
): Promise<ToolResult> {
  ctx.signal.throwIfAborted();
  const name = call.toolName;
  if (!isToolName(name)) {
    return errorResult(`Unknown tool "${name}". The tools are: ${TOOL_NAMES.join(", ")}.`);
  }
  let target: Target;
  switch (name) {
    case "execute": {
      const parsed = TOOL_INPUTS.execute.safeParse(call.input);
      const input = parsed.success ? parsed.data : undefined;
      const timeout = parseDuration(input?.timeout ?? "10s");
      target = {
        tool: "execute",
        background: input?.run_in_background === true,
        timeoutMs: timeout.ok && timeout.ms > 0 ? timeout.ms : DEFAULT_EXECUTE_TIMEOUT_MS,
      };
      break;
    }
    case "write_file":
    case "edit_files":
      target = { tool: name, paths: pathsOf(ctx, call.input) };
      break;
    case "process_signal":
      return errorResult(
        "Interrupted before it produced a result; the signal may or may not have been " +
          "delivered. Check the process with process_list or process_output before signaling it again.",
      );
    case "process_output":
    case "process_list":
    case "read_file":
      return errorResult(
        "Interrupted before it produced a result; nothing was changed; run it again if you still need it.",
      );
    default:
      return assertNever(name);
  }

  // US6: a foreground command past its timeout and background work are never killed.
  const stopBelowMs = target.tool === "execute" && !target.background ? target.timeoutMs : 0;
  let answer: CancelToolCallResponse & { runAgeMs: number };
  try {
    answer = await resending(ctx, (bound, laterMs) =>
      ctx.client.cancelToolCall(toolCallOf(ctx, call.toolCallId, laterMs), stopBelowMs, bound),
    );
  } catch (err) {
    o.onStarted?.(true);
    return failureResult(ctx, call, target, err);
  }
  o.onStarted?.(answer.started);
  if (!answer.started) return target.tool === "execute" ? notRunResult() : notAppliedResult();
  return startedResult(ctx, call, target, answer);
}

/** The absolute paths a write or edit named, as the live tool resolved them (context.ts). */
function pathsOf(ctx: ToolContext, input: unknown): string[] {
  const named: unknown[] = isRecord(input)
    ? Array.isArray(input.files)
      ? input.files.map((f) => (isRecord(f) ? f.path : undefined))
      : [input.path]
    : [];
  return named.flatMap((p) => {
    if (typeof p !== "string") return [];
    const resolved = absolutePath(ctx, p);
    return resolved.ok ? [resolved.path] : [];
  });
}

/** The result of a call that was never sent to the agent (its message was never committed). */
export function unsentResult(toolName: string): ToolResult {
  return toolName === "write_file" || toolName === "edit_files"
    ? notAppliedResult()
    : notRunResult();
}

/** The call reached the agent: rebuild the answer the live tool would have given. */
function startedResult(
  ctx: ToolContext,
  call: ToolCallRequest,
  target: Target,
  answer: Extract<CancelToolCallResponse, { started: true }>,
): ToolResult {
  const body = decodeBody(answer.body);
  if (answer.status_code >= 400) {
    const message = errorMessage(body, answer.status_code);
    return target.tool === "execute"
      ? errorResult(`The command did not run: ${message}`)
      : failedResult(message, target.tool);
  }
  switch (target.tool) {
    case "execute":
      return executeResult(ctx, call, target, answer.process, body);
    case "write_file": {
      const message = field(body, "message");
      return {
        status: "applied",
        message: message ?? "The file was written.",
        ...(target.paths[0] !== undefined && { path: target.paths[0] }),
      };
    }
    case "edit_files": {
      const files = isRecord(body) && Array.isArray(body.files) ? body.files : undefined;
      return {
        status: "applied",
        paths: target.paths,
        ...(files && { files: files as { path: string; diff: string }[] }),
      };
    }
    default:
      return assertNever(target);
  }
}

function executeResult(
  ctx: ToolContext,
  call: ToolCallRequest,
  target: Extract<Target, { tool: "execute" }>,
  process: ToolCallProcess | undefined,
  body: unknown,
): ToolResult {
  const uuid = uuidOf(ctx, call.toolCallId);
  // US8: an agent without the contract may have named the process itself.
  const named = field(body, "id");
  const processId = named !== undefined && named !== "" ? named : uuid;
  if (!process) {
    if (target.background) return backgroundResult(processId);
    return unknownProcessResult(
      "agent_error",
      processId,
      "The workspace agent reported the start but not the process.",
    );
  }
  if (process.canceled) return canceledResult(process, process.run_age_ms);
  if (process.running) {
    if (target.background) return backgroundResult(processId);
    const why =
      `The user interrupted the turn after the command's timeout of ` +
      `${formatDuration(target.timeoutMs)}; it is still running and was left running.`;
    return timedOutResult(processId, process, why);
  }
  const done: ExecuteCompleted = {
    status: "completed",
    exit_code: process.exit_code ?? -1,
    output: plainOutput(process.output),
    wall_duration_ms: process.run_age_ms,
  };
  if (process.truncated) done.truncated = process.truncated;
  return done;
}

/** The cancel failed: the outcome is unknown, and the result says why and how to check. */
function failureResult(
  ctx: ToolContext,
  call: ToolCallRequest,
  target: Target,
  err: unknown,
): ToolResult {
  const uuid = uuidOf(ctx, call.toolCallId);
  const isExecute = target.tool === "execute";
  if (err instanceof AgentHttpError && err.status === 404) {
    // An agent without the contract has no cancel route: nothing is known.
    const r = isExecute
      ? unknownProcessResult("interrupted", uuid, err.message)
      : unknownFileResult("interrupted", err.message);
    r.note = isExecute
      ? "The call was interrupted before it produced a result; it may have run. Check its " +
        "effects (files, process_list) before running it again."
      : "The call was interrupted before it produced a result; it may have been applied. " +
        "Check the file with read_file before changing it again.";
    return r;
  }
  let reason: Parameters<typeof unknownProcessResult>[0];
  let detail: string;
  try {
    const f = classifyAgentError(err, ctx.signal);
    switch (f.kind) {
      case "unknown":
        reason = f.reason;
        detail = f.detail;
        break;
      case "http":
        reason = "agent_error";
        detail = f.message;
        break;
      default:
        return assertNever(f);
    }
  } catch (thrown) {
    // A stale refusal or an agent refusing this server settles nothing here: the interrupt
    // still owes one honest result, and must end.
    const settles = thrown instanceof StaleToolCallError || thrown instanceof WorkspaceRefusedError;
    if (!settles || ctx.signal.aborted) throw thrown;
    reason = "agent_error";
    detail = thrown.message;
  }
  return isExecute ? unknownProcessResult(reason, uuid, detail) : unknownFileResult(reason, detail);
}

function decodeBody(base64: string): unknown {
  try {
    return JSON.parse(Buffer.from(base64, "base64").toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function field(body: unknown, key: string): string | undefined {
  if (!isRecord(body)) return undefined;
  const v = body[key];
  return typeof v === "string" ? v : undefined;
}

/** A recorded error body `{message, detail?}` as words, like the live path's AgentHttpError. */
function errorMessage(body: unknown, status: number): string {
  const message = field(body, "message") ?? `The workspace agent answered ${status}.`;
  const detail = field(body, "detail");
  return detail ? `${message} (${detail})` : message;
}
