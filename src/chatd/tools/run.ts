// runTool: one tool call of the model, run to exactly one honest result (CHATD.md 6 and 7).
// Input is parsed at the edge (nothing is sent for bad input); the tool runs under the task's
// signal; the outcome carries the execution interval on the context's clock for billing.

import { assertNever } from "../../contract/index.ts";
import type { Handled, ToolContext } from "./context.ts";
import { TOOL_INPUTS, TOOL_NAMES, isToolName, type ToolName } from "./declarations.ts";
import { parseDuration } from "./duration.ts";
import { runEditFiles, runReadFile, runWriteFile } from "./files.ts";
import { runExecute, runProcessList, runProcessOutput, runProcessSignal } from "./processes.ts";
import { errorResult, type ToolResult } from "./results.ts";

export interface ToolCallRequest {
  /** The provider tool call ID. */
  toolCallId: string;
  toolName: string;
  /** The model's arguments, unparsed. */
  input: unknown;
}

export interface ToolOutcome {
  result: ToolResult;
  /** When the tool started and ended, on `ctx.clock` (ms): the execution interval. */
  startedAt: number;
  endedAt: number;
  /** False for input errors and refusals: nothing ran, nothing is billed. */
  billable: boolean;
}

const DEFAULT_EXECUTE_TIMEOUT = "10s";
const DEFAULT_WAIT_TIMEOUT = "10s";

/**
 * Runs one tool call. Throws the task signal's reason when it aborts (the agent keeps
 * working) and a StaleToolCallError when the agent says the call is settled elsewhere; every
 * other path ends with a result.
 */
export async function runTool(ctx: ToolContext, call: ToolCallRequest): Promise<ToolOutcome> {
  ctx.signal.throwIfAborted();
  const prepared = prepare(call);
  if (typeof prepared === "string") {
    // Nothing was sent: an empty interval, not billed.
    const now = ctx.clock.now();
    return { result: errorResult(prepared), startedAt: now, endedAt: now, billable: false };
  }
  const startedAt = ctx.clock.now();
  const handled = await prepared(ctx);
  ctx.signal.throwIfAborted();
  return { ...handled, startedAt, endedAt: ctx.clock.now() };
}

type Runner = (ctx: ToolContext) => Promise<Handled>;

/** The call's runner with its input parsed, or a message naming what is wrong. */
function prepare(call: ToolCallRequest): Runner | string {
  const name = call.toolName;
  if (!isToolName(name)) {
    return `Unknown tool "${name}". The tools are: ${TOOL_NAMES.join(", ")}.`;
  }
  switch (name) {
    case "execute": {
      const input = parseInput("execute", call.input);
      if (typeof input === "string") return input;
      const timeout = durationOf("execute", "timeout", input.timeout ?? DEFAULT_EXECUTE_TIMEOUT);
      if (typeof timeout === "string") return timeout;
      if (timeout === 0) {
        return (
          "Invalid arguments for execute: timeout must be more than 0s; " +
          "set run_in_background to start a command without waiting for it."
        );
      }
      return (ctx) => runExecute(ctx, call.toolCallId, input, timeout);
    }
    case "process_output": {
      const input = parseInput("process_output", call.input);
      if (typeof input === "string") return input;
      const wait = durationOf(
        "process_output",
        "wait_timeout",
        input.wait_timeout ?? DEFAULT_WAIT_TIMEOUT,
      );
      if (typeof wait === "string") return wait;
      return (ctx) => runProcessOutput(ctx, input, wait);
    }
    case "process_list": {
      const input = parseInput("process_list", call.input ?? {});
      if (typeof input === "string") return input;
      return (ctx) => runProcessList(ctx);
    }
    case "process_signal": {
      const input = parseInput("process_signal", call.input);
      if (typeof input === "string") return input;
      return (ctx) => runProcessSignal(ctx, input);
    }
    case "read_file": {
      const input = parseInput("read_file", call.input);
      if (typeof input === "string") return input;
      return (ctx) => runReadFile(ctx, input);
    }
    case "write_file": {
      const input = parseInput("write_file", call.input);
      if (typeof input === "string") return input;
      return (ctx) => runWriteFile(ctx, call.toolCallId, input);
    }
    case "edit_files": {
      const input = parseInput("edit_files", call.input);
      if (typeof input === "string") return input;
      return (ctx) => runEditFiles(ctx, call.toolCallId, input);
    }
    default:
      return assertNever(name);
  }
}

/** The parsed input, or a message naming every bad field. */
function parseInput<N extends ToolName>(
  name: N,
  input: unknown,
): ReturnType<(typeof TOOL_INPUTS)[N]["parse"]> | string {
  const parsed = TOOL_INPUTS[name].safeParse(input);
  if (parsed.success) return parsed.data as ReturnType<(typeof TOOL_INPUTS)[N]["parse"]>;
  const problems = parsed.error.issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.join(".") : "arguments";
    return `${field}: ${issue.message}`;
  });
  return `Invalid arguments for ${name}: ${problems.join("; ")}.`;
}

/** Milliseconds of a duration argument, or a message naming the field. */
function durationOf(tool: ToolName, field: string, text: string): number | string {
  const parsed = parseDuration(text);
  return parsed.ok ? parsed.ms : `Invalid arguments for ${tool}: ${field}: ${parsed.message}`;
}
