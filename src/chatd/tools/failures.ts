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

/**
 * The workspace agent refuses every request this server sends, so no retry and no other call
 * can succeed: a wrong agent token (401), or a TLS setup the client cannot speak to (a
 * certificate it does not trust, an https URL for an agent that speaks plain HTTP). The task
 * ends the turn in error with this message (calls left without a result get an honest
 * `unknown` when the user sends the next message); an interrupt gives `unknown` results.
 */
export class WorkspaceRefusedError extends Error {
  override readonly name = "WorkspaceRefusedError";
  constructor(
    readonly reason: "unauthorized" | "tls",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** TLS failures that only a change of configuration mends (Node's and OpenSSL's codes). */
const TLS_CERTIFICATE_CODES = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);
const TLS_PLAINTEXT_CODES = new Set([
  "ERR_SSL_WRONG_VERSION_NUMBER",
  "ERR_SSL_PACKET_LENGTH_TOO_LONG",
]);

/** The refusal `err` proves, if it is one (see WorkspaceRefusedError). */
export function workspaceRefusal(err: unknown): WorkspaceRefusedError | undefined {
  if (err instanceof AgentHttpError && err.status === 401) {
    return new WorkspaceRefusedError(
      "unauthorized",
      "The workspace agent refused the server's token (HTTP 401): set the workspace's " +
        "agent_token to the agent's token, then send a message to continue.",
    );
  }
  if (err instanceof AgentConnectionError && err.phase === "connect") {
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    if (typeof code !== "string") return undefined;
    if (TLS_CERTIFICATE_CODES.has(code)) {
      return new WorkspaceRefusedError(
        "tls",
        `The workspace agent's TLS certificate is not trusted (${code}): give the server the ` +
          "CA that signed it (NODE_EXTRA_CA_CERTS, see the README), then send a message to continue.",
        { cause: err },
      );
    }
    if (TLS_PLAINTEXT_CODES.has(code)) {
      return new WorkspaceRefusedError(
        "tls",
        `The workspace agent does not speak TLS at its https:// URL (${code}): register it ` +
          "with its http:// URL, or serve it over TLS, then send a message to continue.",
        { cause: err },
      );
    }
  }
  return undefined;
}

export type AgentFailure =
  /** The outcome is not known (or the agent refused without proof either way). */
  | { kind: "unknown"; reason: UnknownReason; detail: string; billable: boolean }
  /** The agent answered with a plain HTTP error: the request did not do its work. */
  | { kind: "http"; status: number; message: string };

/**
 * Classifies `err` from an agent request. Rethrows the task signal's reason when it aborted
 * (the agent keeps working), a StaleToolCallError for a stale refusal, a WorkspaceRefusedError
 * for an agent that refuses this server outright, and any error that did not come from talking
 * to the agent (a bug: the task retries, which the contract makes safe).
 */
export function classifyAgentError(err: unknown, signal: AbortSignal): AgentFailure {
  if (signal.aborted) throw signal.reason;
  const refusal = workspaceRefusal(err);
  if (refusal) throw refusal;
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
