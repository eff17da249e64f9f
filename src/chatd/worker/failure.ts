// What the worker says about a failed task attempt, and what it decides from it. A failure is
// described in a short sentence a person can act on (last_error, `retrying`) and summarised for
// logs by its class, code and message only: never the request (an APICallError carries the
// prompt in requestBodyValues), never a query's parameters, never a key. It is permanent when no
// retry can change it, and a provider's Retry-After says how long the next attempt must wait.

import {
  APICallError,
  InvalidResponseDataError,
  JSONParseError,
  LoadAPIKeyError,
  LoadSettingError,
  TypeValidationError,
} from "ai";
import { ChatNotFoundError, FenceError } from "../chats.ts";
import { UnsupportedAgentUrlError } from "../agents.ts";
import { ContextTooLongError } from "../prompt/index.ts";
import { StaleToolCallError, WorkspaceRefusedError } from "../tools/index.ts";

/** The longest message kept from an error in a log line or a sentence (characters). */
export const MAX_ERROR_MESSAGE_CHARS = 300;

/** The task ended in a way that needs no retry and no error report. */
export function isExpectedExit(err: unknown): boolean {
  return (
    err instanceof FenceError ||
    err instanceof ChatNotFoundError ||
    err instanceof StaleToolCallError
  );
}

/**
 * A failure no retry can change: a model answer that is not retryable (a bad key, an unknown
 * model, a bad request), a model with no API key at all, a workspace agent URL the client cannot speak to, an agent that
 * refuses the server's token or TLS configuration.
 */
export function isPermanent(err: unknown): boolean {
  if (APICallError.isInstance(err)) return !err.isRetryable;
  // A model configured without a key (and none in the environment) has none at the next try.
  // So is one missing a setting the provider needs (Bedrock without a region).
  if (LoadAPIKeyError.isInstance(err) || LoadSettingError.isInstance(err)) return true;
  return (
    err instanceof ContextTooLongError ||
    err instanceof UnsupportedAgentUrlError ||
    err instanceof WorkspaceRefusedError
  );
}

/**
 * A model answer the SDK could not read: a malformed stream chunk, a tool call without a name.
 * Another attempt may be sampled differently, but a provider that keeps answering so would keep
 * the chat busy for the whole retry limit: such failures give up after a few in a row.
 */
export function isUnreadableAnswer(err: unknown): boolean {
  return (
    InvalidResponseDataError.isInstance(err) ||
    JSONParseError.isInstance(err) ||
    TypeValidationError.isInstance(err)
  );
}

/** How many unreadable model answers in a row end the task (`gave_up`). */
export const UNREADABLE_ANSWER_MAX_ATTEMPTS = 3;

function cap(text: string): string {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length <= MAX_ERROR_MESSAGE_CHARS ? t : `${t.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…`;
}

/** The innermost cause's message (fetch's "fetch failed" says less than its cause). */
function rootMessage(err: unknown): string | undefined {
  const seen = new Set<unknown>();
  let message: string | undefined;
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    if (e.message) message = e.message;
  }
  return message;
}

/** The first `code` (a string) on the error or its causes: ECONNREFUSED, 22P05, ... */
function codeOf(err: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return code;
  }
  return undefined;
}

/** A log line's view of an error: its class, code, HTTP status and message, nothing else. */
export interface FailureSummary {
  type: string;
  code?: string;
  status?: number;
  message: string;
}

export function failureSummary(err: unknown): FailureSummary {
  const s: FailureSummary = {
    type: err instanceof Error ? err.name : typeof err,
    message: cap(err instanceof Error ? err.message : String(err)),
  };
  const code = codeOf(err);
  if (code !== undefined) s.code = code;
  if (APICallError.isInstance(err) && err.statusCode !== undefined) s.status = err.statusCode;
  return s;
}

/** Network error codes in words. */
const NETWORK_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found (DNS lookup failed)",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EPIPE: "connection closed",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  UND_ERR_SOCKET: "connection closed",
  UND_ERR_HEADERS_TIMEOUT: "no answer in time",
  UND_ERR_BODY_TIMEOUT: "the answer stalled",
};

/** The model's base URL as the message shows it: no credentials, no query, no endpoint path. */
function modelUrl(url: string): string {
  if (!URL.canParse(url)) return "the configured base URL";
  const u = new URL(url);
  const path = u.pathname.replace(
    /\/(chat\/completions|completions|responses|messages|embeddings)$|\/models\/.*$/,
    "",
  );
  return `${u.protocol}//${u.host}${path === "/" ? "" : path}`;
}

/**
 * A short sentence saying what failed, for `last_error` and `retrying.last_error`: never a key,
 * never the conversation. "Cannot connect to the model: connection refused
 * (http://127.0.0.1:1/v1)."
 */
export function failureSentence(err: unknown): string {
  if (APICallError.isInstance(err)) {
    const where = modelUrl(err.url);
    const status = err.statusCode;
    if (status === undefined) {
      const code = codeOf(err);
      const why = (code && NETWORK_WORDS[code]) ?? code ?? rootMessage(err) ?? "network error";
      return cap(`Cannot connect to the model: ${why} (${where}).`);
    }
    if (status === 401 || status === 403)
      return `The model provider refused the API key (HTTP ${status}, ${where}): check the model's key.`;
    if (status === 429) return `The model provider is rate limiting requests (HTTP 429, ${where}).`;
    // A redirect the model's fetch did not follow: to another origin (model/http-fetch.ts).
    const location = new Headers(err.responseHeaders).get("location");
    if (status >= 300 && status < 400 && location !== null) {
      const to = URL.canParse(location, err.url) ? modelUrl(new URL(location, err.url).href) : "";
      return cap(
        `The model provider redirected the request elsewhere (HTTP ${status}, ${where}${to && ` to ${to}`}): the model's key goes only to its base URL, so set the base URL to the new address.`,
      );
    }
    // The provider's own message (not its body) says what is wrong with the request.
    return cap(`The model provider answered HTTP ${status} (${where}): ${err.message}`);
  }
  if (err instanceof Error) return cap(err.message);
  return cap(String(err));
}

/** The longest wait a provider's Retry-After is honoured for; a longer ask waits this long. */
export const RETRY_AFTER_MAX_MS = 60_000;

/**
 * How long the provider asked to wait before the next request (`retry-after-ms`, or
 * `retry-after` in seconds or as an HTTP date, read against `wallNowMs`), capped at
 * RETRY_AFTER_MAX_MS; undefined when it asked nothing.
 */
export function retryAfterMs(
  err: unknown,
  wallNowMs: number,
  maxMs: number = RETRY_AFTER_MAX_MS,
): number | undefined {
  if (!APICallError.isInstance(err) || !err.responseHeaders) return undefined;
  const headers = new Headers(err.responseHeaders);
  let ms: number | undefined;
  const precise = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(precise) && precise >= 0) ms = precise;
  else {
    const value = (headers.get("retry-after") ?? "").trim();
    if (/^\d+(\.\d+)?$/.test(value)) ms = Number.parseFloat(value) * 1000;
    else if (value !== "") {
      const at = Date.parse(value);
      if (Number.isFinite(at)) ms = Math.max(0, at - wallNowMs);
    }
  }
  return ms === undefined ? undefined : Math.min(Math.ceil(ms), maxMs);
}
