// How an error from the agent client becomes part of one honest result (CHATD.md 7). The
// task's abort and the stale refusals are not results: they are rethrown, so a stopped or
// stale task commits nothing; everything else is classified by what it proves.

import {
  AgentAnswerTooLargeError,
  AgentConnectionError,
  AgentHttpError,
  AgentTimeoutError,
  ToolCallError,
  assertNever,
} from "../../contract/index.ts";
import { answerTooLargeText, connectionFailureText } from "../agent-failure-text.ts";
import type { UnknownReason } from "./results.ts";

/**
 * The agent refused a tool call only a stale task sends (`stale_tool_call`,
 * `tool_call_canceled`): a newer message or an interrupt has already settled it. The task
 * must commit nothing; its commit would fail the fence anyway.
 */
export class StaleToolCallError extends Error {
  override readonly name = "StaleToolCallError";
  constructor(
    readonly code: "stale_tool_call" | "tool_call_canceled",
    message: string,
  ) {
    super(message);
  }
}

export type AgentFailure =
  /** The outcome is not known (or the agent refused without proof either way). */
  | { kind: "unknown"; reason: UnknownReason; detail: string; billable: boolean }
  /** The agent answered with a plain HTTP error: the request did not do its work. */
  | { kind: "http"; status: number; message: string };

/**
 * Classifies `err` from an agent request. Rethrows the task signal's reason when it aborted
 * (the agent keeps working), a StaleToolCallError for a stale refusal, and any error that did
 * not come from talking to the agent (a bug: the task retries, which the contract makes safe).
 */
export function classifyAgentError(err: unknown, signal: AbortSignal): AgentFailure {
  if (signal.aborted) throw signal.reason;
  if (err instanceof ToolCallError) {
    switch (err.code) {
      case "stale_tool_call":
      case "tool_call_canceled":
        throw new StaleToolCallError(err.code, err.message);
      case "agent_started_after_tool_call":
      case "input_mismatch":
        return { kind: "unknown", reason: err.code, detail: err.message, billable: false };
      default:
        return assertNever(err.code);
    }
  }
  // The text never carries the socket's error (an address, a port): agent-failure-text.ts.
  if (err instanceof AgentConnectionError) {
    const detail = connectionFailureText(err);
    return err.phase === "connect"
      ? { kind: "unknown", reason: "agent_unreachable", detail, billable: false }
      : { kind: "unknown", reason: "agent_no_answer", detail, billable: true };
  }
  if (err instanceof AgentAnswerTooLargeError) {
    return {
      kind: "unknown",
      reason: "agent_error",
      detail: answerTooLargeText(err),
      billable: true,
    };
  }
  if (err instanceof AgentTimeoutError) {
    return { kind: "unknown", reason: "agent_no_answer", detail: err.message, billable: true };
  }
  if (err instanceof AgentHttpError) {
    const detail = err.detail ? ` (${err.detail})` : "";
    return { kind: "http", status: err.status, message: `${err.message}${detail}` };
  }
  throw err;
}

/** A read-only request's failure as words for an `error` result: reads are safe to repeat. */
export function readFailureMessage(failure: AgentFailure): string {
  switch (failure.kind) {
    case "http":
      return failure.message;
    case "unknown":
      return `${failure.detail} Nothing was changed; try again later.`;
    default:
      return assertNever(failure);
  }
}

/** Whether a failed read spent agent time: it was sent and may have been worked on. */
export function billableRead(failure: AgentFailure): boolean {
  return failure.kind === "unknown" && failure.billable;
}
