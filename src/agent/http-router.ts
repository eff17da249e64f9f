// The agent's HTTP router: the plain node:http request handler every route runs on —
// routing by method and path segments, the edge's refusals (http-edge.ts) before any route,
// raw-byte bodies under the route's limit, a failing handler answered 500, and a close that
// takes no new request and keeps no connection open. The same handler serves node:http's
// requests and HTTP/2's compatibility requests over the dial-out connection.
//
// No framework: a start-and-wait is two requests on the agent's hot path, and Fastify's
// pipeline (hooks, content-type parsers, reply serialization) cost the agent more CPU per
// request than the contract's own work (docs/benchmarks.md, Start-up).

import http from "node:http";
import { parse as parseQuery } from "node:querystring";
import type { ChatId, Clock, DistinctHeaders } from "../contract/index.ts";
import { answerMalformedRequest } from "../contract/malformed-request.ts";
import { errorAnswer } from "./answer.ts";
import {
  distinctHeaders,
  edgeCheck,
  hasNoBody,
  sendAnswer,
  type AgentRawRequest,
  type AgentResponse,
} from "./http-edge.ts";

/** Largest JSON body any route takes. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;
/** How long an idle keep-alive connection stays open (the server's client reuses them). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

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
  /** Header values by lower-case name, repeats kept apart. */
  readonly headers: DistinctHeaders;
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
    const headers = distinctHeaders(raw);
    const edge = edgeCheck(raw, headers, this.#token, found?.route.json ?? false);
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
        headers,
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
      if (route.method !== method) continue;
      const params = paramsOf(route.segments, segments);
      if (params !== "no_match") return { route, params };
    }
    return undefined;
  }
}

/**
 * The parameters of a route's path segments in a request's (`:name` takes any non-empty
 * segment, decoded), undefined when one is not valid percent-encoding, or "no_match".
 */
function paramsOf(
  pattern: string[],
  segments: string[],
): Record<string, string> | undefined | "no_match" {
  if (pattern.length !== segments.length) return "no_match";
  const params: Record<string, string> = {};
  let valid = true;
  for (const [i, want] of pattern.entries()) {
    const got = segments[i]!;
    if (!want.startsWith(":")) {
      if (want !== got) return "no_match";
      continue;
    }
    if (got === "") return "no_match";
    try {
      params[want.slice(1)] = decodeURIComponent(got);
    } catch {
      valid = false;
    }
  }
  return valid ? params : undefined;
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
  // Nothing follows the head (an HTTP/2 request without a length may still send DATA).
  if (raw.httpVersionMajor === 1 && hasNoBody(raw.headers)) {
    raw.resume();
    return done(Buffer.alloc(0));
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
