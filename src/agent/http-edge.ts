// The agent's HTTP edge: what every request meets before its route — the refusals (a
// browser's Origin, a wrong token, a bad Coder-Chat-Id, a non-JSON body on a JSON route) and
// the request's chat — and what every route answers with: the `{message, detail?}` shape,
// JSON bodies parsed with a schema, repeated query parameters refused. The router
// (http-router.ts) runs these for node:http's requests and HTTP/2's compatibility requests
// over the dial-out connection alike.

import { timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { z } from "zod";
import {
  RUN_AGE_HEADER,
  parseChatIdHeader,
  type ChatId,
  type DistinctHeaders,
} from "../contract/index.ts";
import { codedAnswer, errorAnswer, type Answer } from "./answer.ts";

export type AgentRawRequest = IncomingMessage | Http2ServerRequest;
export type AgentResponse = ServerResponse | Http2ServerResponse;

/**
 * Header values by lower-case name with repeats kept apart. Node joins repeats in
 * `headers`; `headersDistinct` keeps them, and is rebuilt from `rawHeaders` where a request
 * lacks it (HTTP/2's compatibility request).
 */
export function distinctHeaders(raw: AgentRawRequest): DistinctHeaders {
  if ("headersDistinct" in raw && raw.headersDistinct) return raw.headersDistinct;
  const out: Record<string, string[]> = {};
  for (let i = 0; i < raw.rawHeaders.length; i += 2) {
    (out[raw.rawHeaders[i]!.toLowerCase()] ??= []).push(raw.rawHeaders[i + 1]!);
  }
  return out;
}

const RUN_AGE_HEADER_NAME = RUN_AGE_HEADER.toLowerCase();

/** Writes an answer: its status, its Content-Type when it has one, the run age, its bytes. */
export function sendAnswer(res: AgentResponse, answer: Answer, runAgeMs?: number): void {
  const headers: Record<string, string | number> = { "content-length": answer.body.length };
  if (answer.contentType !== "") headers["content-type"] = answer.contentType;
  if (runAgeMs !== undefined)
    headers[RUN_AGE_HEADER_NAME] = String(Math.max(0, Math.floor(runAgeMs)));
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}

/** Parses a JSON body with a schema; a failure is a 400 saying what was wrong. */
export function parseJsonBody<T>(
  body: Buffer,
  schema: z.ZodType<T>,
): { ok: true; value: T } | { ok: false; answer: Answer } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, answer: errorAnswer(400, "Request body must be valid JSON.") };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`)
      .join("; ");
    return { ok: false, answer: errorAnswer(400, "Invalid request body.", detail) };
  }
  return { ok: true, value: parsed.data };
}

/**
 * Why the edge refuses a request before its route (or its 404); else the request's chat.
 * `json`: the route takes a JSON body.
 */
export function edgeCheck(
  raw: AgentRawRequest,
  headers: DistinctHeaders,
  token: Buffer | undefined,
  json: boolean,
): { refusal: Answer } | { refusal?: undefined; chatId: ChatId | undefined } {
  // The agent serves only its server, never a browser: a page's request carries an Origin
  // (chatd's, and the dial-out connection's, never do), so it is refused before anything.
  if (raw.headers.origin !== undefined) {
    return {
      refusal: codedAnswer(
        "origin_refused",
        "Requests from web pages are refused.",
        "The workspace agent answers only its server; a request with an Origin header comes from a browser.",
      ),
    };
  }
  if (token && !authorized(headers, token)) {
    return {
      refusal: errorAnswer(
        401,
        "Missing or wrong agent token.",
        "Send Authorization: Bearer <token>.",
      ),
    };
  }
  const chat = parseChatIdHeader(headers);
  if (chat.kind === "error") {
    return { refusal: errorAnswer(400, "Invalid Coder-Chat-Id header.", chat.detail) };
  }
  if (json && !jsonContentType(raw.headers, headers)) {
    return {
      refusal: codedAnswer(
        "unsupported_media_type",
        "Send the request body as Content-Type: application/json.",
        `got ${JSON.stringify(raw.headers["content-type"] ?? "no Content-Type")}`,
      ),
    };
  }
  return { chatId: chat.kind === "chat" ? chat.chatId : undefined };
}

/** HTTP/1.1 framing says no body follows the head: no Content-Length (or 0), not chunked. */
export function hasNoBody(headers: IncomingHttpHeaders): boolean {
  return headers["transfer-encoding"] === undefined && (headers["content-length"] ?? "0") === "0";
}

/**
 * A 400 naming the first query parameter given more than once (the query parser makes it an
 * array); undefined when every parameter has one value.
 */
export function repeatedQuery(
  query: Record<string, string | string[] | undefined>,
): Answer | undefined {
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) {
      return codedAnswer(
        "repeated_query_parameter",
        `The ${name} query parameter is given ${value.length} times. Pass it once.`,
      );
    }
  }
  return undefined;
}

/**
 * A JSON route's Content-Type: `application/json` (parameters allowed), or none at all on a
 * request without a body (a bodiless cancel is `{}`). Anything else, `text/plain` above all
 * (a form or a no-CORS fetch sends it without a preflight), or a repeated one, is refused.
 */
function jsonContentType(joined: IncomingHttpHeaders, headers: DistinctHeaders): boolean {
  const types = headers["content-type"];
  // Node keeps only the first of repeated Content-Types: two are ambiguous, so neither is taken.
  if (types !== undefined && types.length > 1) return false;
  const type = joined["content-type"];
  if (type === undefined) return hasNoBody(joined);
  return type.split(";")[0]!.trim().toLowerCase() === "application/json";
}

function authorized(headers: DistinctHeaders, token: Buffer): boolean {
  const values = headers.authorization;
  if (values?.length !== 1) return false;
  const m = /^Bearer (.+)$/.exec(values[0]!);
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  return given.length === token.length && timingSafeEqual(given, token);
}
