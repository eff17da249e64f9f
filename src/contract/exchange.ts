// One request to an agent, from its spec to its answer: the URL's query, the bearer token and
// the tool call headers (stamped by the transport once connected), the request's bound, the
// observer told of its end, and a non-2xx answer turned into a typed error. The client
// (client.ts) has one method per route and sends each through here.

import type { Clock } from "./clock.ts";
import { AgentHttpError, decodeToolCallError } from "./errors.ts";
import {
  CHAT_ID_HEADER,
  RUN_AGE_HEADER,
  parseRunAgeHeader,
  toolCallRequestHeaders,
} from "./headers.ts";
import type { ChatId, MessageId } from "./ids.ts";
import type { AgentTransport } from "./transport.ts";

/** Default bound of one request when the caller gives none. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** Identifies the tool call a request acts for. */
export interface ToolCall {
  chatId: ChatId;
  messageId: MessageId;
  /** The provider tool call ID, unescaped. */
  toolCallId: string;
  /** How long ago the call was committed (database clock), before connecting. */
  ageMs: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Bound on the whole request, from connect to the last body byte. */
  timeoutMs?: number;
}

/** One request as the `onRequest` observer sees it. */
export interface AgentRequestRecord {
  /** `METHOD /path` with IDs as `{id}`: few distinct values, fit for a metric label. */
  route: string;
  /** From the call to its end, on the client's clock. */
  durationMs: number;
  /** The answer's status, when an answer came. */
  status?: number;
  /** Why no answer came (connection, timeout), or the caller's abort reason. */
  error?: unknown;
  /** The caller's own signal ended the request: it stopped waiting, the agent did not fail. */
  aborted: boolean;
  /** The tool call the request acted for, if any. */
  toolCall?: ToolCall;
  /** The chat a read-only request acted for, if any. */
  chatId?: ChatId;
}

/** The request's own bound ran out before the agent answered. */
export class AgentTimeoutError extends Error {
  override readonly name = "AgentTimeoutError";
  constructor(readonly timeoutMs: number) {
    super(`The workspace agent did not answer within ${timeoutMs} ms.`);
  }
}

export interface RawAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  runAgeMs: number;
}

export interface RequestSpec {
  method: "GET" | "POST";
  path: string;
  /** The route template, for the observer (default: `METHOD path`). */
  route?: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: Buffer;
  contentType?: string;
  chatId?: ChatId;
  toolCall?: ToolCall;
}

export interface ExchangeOptions {
  transport: AgentTransport;
  token: string | undefined;
  clock: Clock;
  defaultTimeoutMs: number;
  onRequest: ((r: AgentRequestRecord) => void) | undefined;
}

export class AgentExchange {
  readonly #o: ExchangeOptions;

  constructor(o: ExchangeOptions) {
    this.#o = o;
  }

  /** Closes idle connections. */
  close(): void {
    this.#o.transport.close();
  }

  /** Sends `value` as a JSON body; see expectOk. */
  json(
    method: "POST",
    path: string,
    value: unknown,
    scope: { toolCall?: ToolCall; chatId?: ChatId; route?: string },
    opts: CallOptions,
  ): Promise<RawAnswer> {
    return this.expectOk(
      {
        method,
        path,
        body: Buffer.from(JSON.stringify(value)),
        contentType: "application/json",
        ...scope,
      },
      opts,
    );
  }

  /** Sends the request; a non-2xx answer becomes a ToolCallError or an AgentHttpError. */
  async expectOk(spec: RequestSpec, opts: CallOptions): Promise<RawAnswer> {
    const a = await this.send(spec, opts);
    if (a.status >= 200 && a.status < 300) return a;
    const coded = decodeToolCallError(a.status, a.contentType, a.body);
    if (coded) throw coded;
    if (a.status >= 300 && a.status < 400) {
      throw new AgentHttpError(
        a.status,
        "The workspace agent answered with a redirect; redirects are refused.",
      );
    }
    let message = `The workspace agent answered ${a.status}.`;
    let detail: string | undefined;
    try {
      const body = JSON.parse(a.body.toString("utf8")) as { message?: unknown; detail?: unknown };
      if (typeof body.message === "string") message = body.message;
      if (typeof body.detail === "string") detail = body.detail;
    } catch {
      // not JSON: keep the generic message
    }
    throw new AgentHttpError(a.status, message, detail, a.body);
  }

  /** One HTTP exchange, answered with whatever status came back. */
  async send(spec: RequestSpec, opts: CallOptions = {}): Promise<RawAnswer> {
    const timeoutMs = opts.timeoutMs ?? this.#o.defaultTimeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new AgentTimeoutError(timeoutMs)), timeoutMs);
    const signal = opts.signal
      ? AbortSignal.any([opts.signal, controller.signal])
      : controller.signal;
    const began = this.#o.clock.now();
    let answer: RawAnswer | undefined;
    let error: unknown;
    try {
      signal.throwIfAborted();
      answer = await this.#exchange(spec, signal);
      return answer;
    } catch (err) {
      error = err;
      throw err;
    } finally {
      clearTimeout(timer);
      this.#observe(spec, began, answer, error, opts.signal?.aborted === true);
    }
  }

  #observe(
    spec: RequestSpec,
    began: number,
    answer: RawAnswer | undefined,
    error: unknown,
    aborted: boolean,
  ): void {
    if (!this.#o.onRequest) return;
    const r: AgentRequestRecord = {
      route: spec.route ?? `${spec.method} ${spec.path}`,
      durationMs: this.#o.clock.now() - began,
      aborted,
    };
    if (answer) r.status = answer.status;
    else r.error = error;
    if (spec.toolCall) r.toolCall = spec.toolCall;
    const chatId = spec.chatId ?? spec.toolCall?.chatId;
    if (chatId) r.chatId = chatId;
    try {
      this.#o.onRequest(r);
    } catch {
      // An observer's failure is not the request's.
    }
  }

  /** Builds the request's bytes and headers; the transport stamps the tool call headers once connected. */
  async #exchange(spec: RequestSpec, signal: AbortSignal): Promise<RawAnswer> {
    let path = spec.path;
    if (spec.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(spec.query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) path += "?" + s;
    }
    const headers: Record<string, string> = {};
    if (this.#o.token) headers.authorization = `Bearer ${this.#o.token}`;
    if (spec.contentType) headers["content-type"] = spec.contentType;
    if (spec.chatId) headers[CHAT_ID_HEADER] = spec.chatId;
    if (spec.body) headers["content-length"] = String(spec.body.length);
    const toolCall = spec.toolCall;
    const a = await this.#o.transport.exchange(
      {
        method: spec.method,
        path,
        headers,
        ...(spec.body && { body: spec.body }),
        ...(toolCall && {
          stamp: (connectMs: number) => {
            const { ageMs, ...rest } = toolCall;
            return toolCallRequestHeaders(toolCall.chatId, { ...rest, ageMs: ageMs + connectMs });
          },
        }),
      },
      signal,
    );
    return {
      status: a.status,
      contentType: a.contentType,
      body: a.body,
      runAgeMs: parseRunAgeHeader(a.headerValues(RUN_AGE_HEADER.toLowerCase())),
    };
  }
}

/** The answer's body as JSON; a body that is not JSON is an AgentHttpError. */
export function parseJson(a: RawAnswer): unknown {
  try {
    return JSON.parse(a.body.toString("utf8"));
  } catch (err) {
    throw new AgentHttpError(
      a.status,
      "The workspace agent answered with a body that is not JSON.",
      String(err),
      a.body,
    );
  }
}
