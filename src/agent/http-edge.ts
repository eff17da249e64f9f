// The agent's HTTP edge: the plain node:http request handler every route runs on — routing by
// method and path, raw-byte bodies under a limit, the request's entry instant and chat context,
// refusals before any route (a browser's Origin, a wrong token, a non-JSON body on a JSON route,
// what the HTTP parser refuses) and the `{message, detail?}` error shape — and the parsing of a
// route's JSON body. The same handler serves node:http's requests and HTTP/2's compatibility
// requests over the dial-out connection.
//
// No framework: a start-and-wait is two requests on the agent's hot path, and Fastify's
// pipeline (hooks, content-type parsers, reply serialization) cost the agent more CPU per
// request than the contract's own work (docs/performance.md, Start-up).

import { timingSafeEqual } from "node:crypto";
import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { parse as parseQuery } from "node:querystring";
import type { z } from "zod";
import {
  RUN_AGE_HEADER,
  parseChatIdHeader,
  type ChatId,
  type Clock,
  type DistinctHeaders,
} from "../contract/index.ts";
import { answerMalformedRequest } from "../contract/malformed-request.ts";
import { codedAnswer, errorAnswer, type Answer } from "./answer.ts";

/** Largest JSON body any route takes. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;
/** How long an idle keep-alive connection stays open (the server's client reuses them). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

export type AgentRawRequest = IncomingMessage | Http2ServerRequest;
export type AgentResponse = ServerResponse | Http2ServerResponse;

/** What a route's handler sees of a request. */
export interface AgentRequest {
  readonly raw: AgentRawRequest;
  readonly method: string;
  /** The request target as sent: path and query, not decoded. */
  readonly url: string;
  /** The decoded query; a parameter given more than once is an array (see repeatedQuery). */
  readonly query: Record<string, string | string[] | undefined>;
  /** The route's `:name` path segments, decoded. */
  readonly params: Record<string, string>;
  readonly headers: IncomingHttpHeaders;
  /** The body's exact bytes (empty without one). */
  readonly body: Buffer;
  /** Clock instant the request entered, read before its body: a new tool call's `createdAt`. */
  readonly enteredAt: number;
  /** The request's chat (the Coder-Chat-Id header), when it names one. */
  readonly chatId: ChatId | undefined;
}

/**
 * Answers the request through `res`. Returning without answering leaves the response alone:
 * only for a client that went away.
 */
export type AgentHandler = (request: AgentRequest, res: AgentResponse) => unknown;

export interface RouteOptions {
  /** The body is JSON: the request must say `Content-Type: application/json`. */
  json?: boolean;
  /** Largest body in bytes; JSON_BODY_LIMIT_BYTES by default. */
  bodyLimit?: number;
}

interface Route {
  method: string;
  /** Path segments; one starting with `:` names a parameter. */
  segments: string[];
  handler: AgentHandler;
  json: boolean;
  bodyLimit: number;
}

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

/** Marks a route whose body is JSON: it requires `Content-Type: application/json`. */
export const JSON_ROUTE = { json: true } as const satisfies RouteOptions;

/**
 * The agent's routes and the handler that serves them: token auth, refusals before any
 * route, bodies under a limit, and the `{message, detail?}` error shape.
 */
export class AgentHttp {
  readonly #clock: Clock;
  readonly #token: Buffer | undefined;
  readonly #routes: Route[] = [];
  #server: http.Server | undefined;
  #closing = false;
  /** Responses not yet finished: those answered after close() start closing their connection. */
  readonly #inFlight = new Set<AgentResponse>();

  constructor(clock: Clock, tokenText?: string) {
    this.#clock = clock;
    this.#token = tokenText ? Buffer.from(tokenText) : undefined;
  }

  get(path: string, handler: AgentHandler): void {
    this.route("GET", path, handler);
  }

  post(path: string, handler: AgentHandler, o: RouteOptions = {}): void {
    this.route("POST", path, handler, o);
  }

  route(method: string, path: string, handler: AgentHandler, o: RouteOptions = {}): void {
    this.#routes.push({
      method,
      segments: path.split("/"),
      handler,
      json: o.json ?? false,
      bodyLimit: o.bodyLimit ?? JSON_BODY_LIMIT_BYTES,
    });
  }

  /** Serves one request: node:http's, or HTTP/2's compatibility request. */
  readonly handle = (raw: AgentRawRequest, res: AgentResponse): void => {
    // The clock is read once, when the request enters, before the body is read.
    const enteredAt = this.#clock.now();
    if (this.#closing) {
      closeAfter(res);
      sendAnswer(res, errorAnswer(503, "The workspace agent is shutting down."));
      return;
    }
    this.#inFlight.add(res);
    res.once("close", () => this.#inFlight.delete(res));
    const url = raw.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    const method = raw.method ?? "GET";
    const found = this.#match(method, path);
    const edge = this.#edge(raw, found?.route);
    if (edge.refusal) return sendAnswer(res, edge.refusal);
    if (!found) {
      return sendAnswer(res, errorAnswer(404, `Route ${method} ${path} not found.`));
    }
    if (found.params === undefined) {
      return sendAnswer(res, errorAnswer(400, "The request path is not validly percent-encoded."));
    }
    const { route, params } = found;
    readBody(raw, route.bodyLimit, (body) => {
      if (body === "too_large") {
        closeAfter(res);
        return sendAnswer(
          res,
          errorAnswer(413, "Request body is too large.", `Send at most ${route.bodyLimit} bytes.`),
        );
      }
      if (body === "failed") return; // the client went away mid-body: nobody to answer
      const request: AgentRequest = {
        raw,
        method,
        url,
        query: parseQuery(q < 0 ? "" : url.slice(q + 1)),
        params,
        headers: raw.headers,
        body,
        enteredAt,
        chatId: edge.chatId,
      };
      let result: unknown;
      try {
        result = route.handler(request, res);
      } catch (err) {
        failed(res, err);
        return;
      }
      if (result instanceof Promise) result.catch((err: unknown) => failed(res, err));
    });
  };

  /** Listens on `host:port` with node:http; answers the address it listens on. */
  async listen(host: string, port: number): Promise<string> {
    const server = http.createServer(
      // Whole requests may take long (a 64 MiB write-file): only an idle head times out.
      { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, requestTimeout: 0 },
      this.handle,
    );
    server.on("clientError", (err: NodeJS.ErrnoException, socket) =>
      answerMalformedRequest(err, socket, (m) => ({ message: m.message, code: m.code })),
    );
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host, port }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.#server = server;
    const addr = server.address();
    if (addr === null || typeof addr === "string")
      throw new Error("The agent is not listening on TCP.");
    const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
    return `http://${h}:${addr.port}`;
  }

  /**
   * New requests get 503 from here, and every answer closes its connection; resolves once the
   * server's requests have ended.
   */
  async close(): Promise<void> {
    this.#closing = true;
    for (const res of this.#inFlight) closeAfter(res);
    const server = this.#server;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await closed;
  }

  #match(
    method: string,
    path: string,
  ): { route: Route; params: Record<string, string> | undefined } | undefined {
    const segments = path.split("/");
    for (const route of this.#routes) {
      if (route.method !== method || route.segments.length !== segments.length) continue;
      let params: Record<string, string> | undefined = {};
      let matches = true;
      for (let i = 0; i < segments.length; i++) {
        const want = route.segments[i]!;
        const got = segments[i]!;
        if (want.startsWith(":")) {
          if (got === "") {
            matches = false;
            break;
          }
          const decoded = decodeSegment(got);
          if (decoded === undefined) params = undefined;
          else if (params) params[want.slice(1)] = decoded;
        } else if (want !== got) {
          matches = false;
          break;
        }
      }
      if (matches) return { route, params };
    }
    return undefined;
  }

  /** Why the edge refuses a request before its route (or its 404); else the request's chat. */
  #edge(
    raw: AgentRawRequest,
    route: Route | undefined,
  ): { refusal: Answer; chatId?: undefined } | { refusal?: undefined; chatId: ChatId | undefined } {
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
    if (this.#token && !authorized(raw, this.#token)) {
      return {
        refusal: errorAnswer(
          401,
          "Missing or wrong agent token.",
          "Send Authorization: Bearer <token>.",
        ),
      };
    }
    const chat = parseChatIdHeader(distinctHeaders(raw));
    if (chat.kind === "error") {
      return { refusal: errorAnswer(400, "Invalid Coder-Chat-Id header.", chat.detail) };
    }
    if (route?.json && !jsonContentType(raw)) {
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
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * Reads the whole body, or stops at `limit` bytes (a Content-Length over it is refused before
 * any byte is read). Calls `done` once, synchronously when there is nothing to read.
 */
function readBody(
  raw: AgentRawRequest,
  limit: number,
  done: (body: Buffer | "too_large" | "failed") => void,
): void {
  const length = raw.headers["content-length"];
  if (length !== undefined && Number(length) > limit) return done("too_large");
  if (length === "0" || (length === undefined && raw.headers["transfer-encoding"] === undefined)) {
    // Nothing follows the head (HTTP/1.1 framing; an HTTP/2 request may still send DATA).
    if (raw.httpVersionMajor === 1) {
      raw.resume();
      return done(Buffer.alloc(0));
    }
  }
  const chunks: Buffer[] = [];
  let received = 0;
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > limit) {
      stop();
      done("too_large");
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = () => {
    stop();
    done(Buffer.concat(chunks, received));
  };
  const onError = () => {
    stop();
    done("failed");
  };
  const stop = () => {
    raw.off("data", onData);
    raw.off("end", onEnd);
    raw.off("error", onError);
    raw.off("aborted", onError);
  };
  raw.on("data", onData);
  raw.on("end", onEnd);
  raw.on("error", onError);
  raw.on("aborted", onError);
}

/**
 * The connection closes after this answer (HTTP/1.1; HTTP/2 has no such header): the client
 * may still be sending what it refuses, or the agent is shutting down.
 */
function closeAfter(res: AgentResponse): void {
  if (res.req.httpVersionMajor === 1 && !res.headersSent) res.setHeader("connection", "close");
}

/** A handler that threw or rejected: a 500, unless it had answered already. */
function failed(res: AgentResponse, err: unknown): void {
  process.stderr.write(
    `${JSON.stringify({ level: "error", msg: "agent request failed", err: String(err instanceof Error ? (err.stack ?? err.message) : err) })}\n`,
  );
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendAnswer(res, errorAnswer(500, "Internal error."));
}

/**
 * A 400 naming the first query parameter given more than once (the query parser makes it an
 * array); undefined when every parameter has one value.
 */
export function repeatedQuery(query: AgentRequest["query"]): Answer | undefined {
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
function jsonContentType(raw: AgentRawRequest): boolean {
  const types = distinctHeaders(raw)["content-type"];
  // Node keeps only the first of repeated Content-Types: two are ambiguous, so neither is taken.
  if (types !== undefined && types.length > 1) return false;
  const type = raw.headers["content-type"];
  if (type === undefined) {
    const length = raw.headers["content-length"];
    return raw.headers["transfer-encoding"] === undefined && (length ?? "0") === "0";
  }
  return type.split(";")[0]!.trim().toLowerCase() === "application/json";
}

function authorized(raw: AgentRawRequest, token: Buffer): boolean {
  const values = distinctHeaders(raw).authorization;
  if (values?.length !== 1) return false;
  const m = /^Bearer (.+)$/.exec(values[0]!);
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  return given.length === token.length && timingSafeEqual(given, token);
}
