// The agent client chatd uses (CONTRACT.md 9). A request with a tool call gets a connected
// socket first (pooled or new) and only then stamps the age header (age + time spent
// connecting), so waiting for a restarting agent never makes the age stale; it never follows
// a redirect and every call is bounded.

import http from "node:http";
import { realClock, type Clock } from "./clock.ts";
import { AgentHttpError, decodeToolCallError } from "./errors.ts";
import {
  CHAT_ID_HEADER,
  RUN_AGE_HEADER,
  parseRunAgeHeader,
  toolCallRequestHeaders,
} from "./headers.ts";
import type { ChatId, MessageId } from "./ids.ts";
import type {
  CancelToolCallResponse,
  EditFilesRequest,
  EditFilesResponse,
  InfoResponse,
  ListDirectoryRequest,
  ListDirectoryResponse,
  ListProcessesResponse,
  MessageResponse,
  ProcessOutputResponse,
  ReadFileLinesResponse,
  StartProcessRequest,
  StartProcessResponse,
} from "./types.ts";
import { toolCallUuid } from "./uuid.ts";

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

/** The chat a read-only request acts for (for chat isolation), if any. */
export interface ChatScope {
  chatId?: ChatId;
}

export interface AgentClientOptions {
  /** `http://host:port` of the agent. */
  baseUrl: string;
  token?: string;
  /** Measures the time spent connecting; the real clock by default. */
  clock?: Clock;
  defaultTimeoutMs?: number;
  /**
   * Told about every request when it ends — answered, failed or aborted — for metrics and
   * logs. It runs on the request's path, so it must be quick; what it throws is ignored.
   */
  onRequest?: (r: AgentRequestRecord) => void;
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

/** The agent could not be reached, or the connection failed before a full answer arrived. */
export class AgentConnectionError extends Error {
  override readonly name = "AgentConnectionError";
  constructor(
    message: string,
    /** `connect`: nothing was sent; `exchange`: the request may have reached the agent. */
    readonly phase: "connect" | "exchange",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The connection was lost after the request went out: it may have reached the agent (and had
 * its effect), and sending it again may get the answer.
 */
export function isLostAnswer(err: unknown): boolean {
  return err instanceof AgentConnectionError && err.phase === "exchange";
}

/** The request's own bound ran out before the agent answered. */
export class AgentTimeoutError extends Error {
  override readonly name = "AgentTimeoutError";
  constructor(readonly timeoutMs: number) {
    super(`The workspace agent did not answer within ${timeoutMs} ms.`);
  }
}

interface RawAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  runAgeMs: number;
}

interface RequestSpec {
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

export class AgentClient {
  readonly #url: URL;
  readonly #token: string | undefined;
  readonly #clock: Clock;
  readonly #defaultTimeoutMs: number;
  readonly #onRequest: ((r: AgentRequestRecord) => void) | undefined;
  readonly #keepAlive = new http.Agent({ keepAlive: true });

  constructor(options: AgentClientOptions) {
    this.#url = new URL(options.baseUrl);
    if (this.#url.protocol !== "http:")
      throw new Error(`Agent URL must be http: ${options.baseUrl}`);
    this.#token = options.token;
    this.#clock = options.clock ?? realClock;
    this.#defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#onRequest = options.onRequest;
  }

  /** Closes idle keep-alive connections. */
  close(): void {
    this.#keepAlive.destroy();
  }

  // ---- routes --------------------------------------------------------------------------

  /** Starts a process; with a tool call, its ID is the tool call UUID. */
  async startProcess(
    req: StartProcessRequest,
    scope: { toolCall?: ToolCall; chatId?: ChatId } = {},
    opts: CallOptions = {},
  ): Promise<StartProcessResponse & { runAgeMs: number }> {
    const a = await this.#json("POST", "/api/v0/processes/start", req, scope, opts);
    return { ...(parse(a) as StartProcessResponse), runAgeMs: a.runAgeMs };
  }

  async processOutput(
    id: string,
    o: ChatScope & { wait?: boolean } = {},
    opts: CallOptions = {},
  ): Promise<ProcessOutputResponse> {
    const spec: RequestSpec = {
      method: "GET",
      path: `/api/v0/processes/${encodeURIComponent(id)}/output`,
      route: "GET /api/v0/processes/{id}/output",
      query: { wait: o.wait ? "true" : undefined },
    };
    if (o.chatId) spec.chatId = o.chatId;
    return parse(await this.#expectOk(spec, opts)) as ProcessOutputResponse;
  }

  async listProcesses(
    scope: ChatScope = {},
    opts: CallOptions = {},
  ): Promise<ListProcessesResponse> {
    const spec: RequestSpec = { method: "GET", path: "/api/v0/processes/list" };
    if (scope.chatId) spec.chatId = scope.chatId;
    return parse(await this.#expectOk(spec, opts)) as ListProcessesResponse;
  }

  async signalProcess(
    id: string,
    signal: "kill" | "terminate",
    scope: ChatScope = {},
    opts: CallOptions = {},
  ): Promise<MessageResponse> {
    const path = `/api/v0/processes/${encodeURIComponent(id)}/signal`;
    const spec = { route: "POST /api/v0/processes/{id}/signal", ...scope };
    return parse(await this.#json("POST", path, { signal }, spec, opts)) as MessageResponse;
  }

  /** Cancels a tool call; the run age comes from the answer's header (0 when absent). */
  async cancelToolCall(
    toolCall: ToolCall,
    stopIfRunAgeBelowMs: number,
    opts: CallOptions = {},
  ): Promise<CancelToolCallResponse & { runAgeMs: number }> {
    const id = toolCallUuid(toolCall.chatId, toolCall.messageId, toolCall.toolCallId);
    const path = `/api/v0/tool-calls/${id}/cancel`;
    const body = { stop_if_run_age_below_ms: Math.trunc(stopIfRunAgeBelowMs) };
    const spec = { route: "POST /api/v0/tool-calls/{id}/cancel", toolCall };
    const a = await this.#json("POST", path, body, spec, opts);
    return { ...(parse(a) as CancelToolCallResponse), runAgeMs: a.runAgeMs };
  }

  async editFiles(
    req: EditFilesRequest,
    scope: { toolCall?: ToolCall; chatId?: ChatId } = {},
    opts: CallOptions = {},
  ): Promise<EditFilesResponse & { runAgeMs: number }> {
    const a = await this.#json("POST", "/api/v0/edit-files", req, scope, opts);
    return { ...(parse(a) as EditFilesResponse), runAgeMs: a.runAgeMs };
  }

  async writeFile(
    path: string,
    data: Buffer | string,
    scope: { toolCall?: ToolCall; chatId?: ChatId } = {},
    opts: CallOptions = {},
  ): Promise<MessageResponse & { runAgeMs: number }> {
    const spec: RequestSpec = {
      method: "POST",
      path: "/api/v0/write-file",
      query: { path },
      body: typeof data === "string" ? Buffer.from(data, "utf8") : data,
      contentType: "application/octet-stream",
      ...scope,
    };
    const a = await this.#expectOk(spec, opts);
    return { ...(parse(a) as MessageResponse), runAgeMs: a.runAgeMs };
  }

  async readFile(
    path: string,
    o: { offset?: number; limit?: number } = {},
    opts: CallOptions = {},
  ): Promise<Buffer> {
    const spec: RequestSpec = { method: "GET", path: "/api/v0/read-file", query: { path, ...o } };
    return (await this.#expectOk(spec, opts)).body;
  }

  async readFileLines(
    path: string,
    o: { offset?: number; limit?: number } = {},
    opts: CallOptions = {},
  ): Promise<ReadFileLinesResponse> {
    const spec: RequestSpec = {
      method: "GET",
      path: "/api/v0/read-file-lines",
      query: { path, ...o },
    };
    return parse(await this.#expectOk(spec, opts)) as ReadFileLinesResponse;
  }

  async listDirectory(
    req: ListDirectoryRequest,
    opts: CallOptions = {},
  ): Promise<ListDirectoryResponse> {
    return parse(
      await this.#json("POST", "/api/v0/list-directory", req, {}, opts),
    ) as ListDirectoryResponse;
  }

  async info(opts: CallOptions = {}): Promise<InfoResponse> {
    return parse(
      await this.#expectOk({ method: "GET", path: "/api/v0/info" }, opts),
    ) as InfoResponse;
  }

  // ---- transport -----------------------------------------------------------------------

  #json(
    method: "POST",
    path: string,
    value: unknown,
    scope: { toolCall?: ToolCall; chatId?: ChatId; route?: string },
    opts: CallOptions,
  ): Promise<RawAnswer> {
    return this.#expectOk(
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
  async #expectOk(spec: RequestSpec, opts: CallOptions): Promise<RawAnswer> {
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

  /**
   * One HTTP exchange, answered with whatever status came back. Exposed for callers that
   * need the raw answer (tests, benchmarks).
   */
  async send(spec: RequestSpec, opts: CallOptions = {}): Promise<RawAnswer> {
    const timeoutMs = opts.timeoutMs ?? this.#defaultTimeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new AgentTimeoutError(timeoutMs)), timeoutMs);
    const signal = opts.signal
      ? AbortSignal.any([opts.signal, controller.signal])
      : controller.signal;
    const began = this.#clock.now();
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
    if (!this.#onRequest) return;
    const r: AgentRequestRecord = {
      route: spec.route ?? `${spec.method} ${spec.path}`,
      durationMs: this.#clock.now() - began,
      aborted,
    };
    if (answer) r.status = answer.status;
    else r.error = error;
    if (spec.toolCall) r.toolCall = spec.toolCall;
    const chatId = spec.chatId ?? spec.toolCall?.chatId;
    if (chatId) r.chatId = chatId;
    try {
      this.#onRequest(r);
    } catch {
      // An observer's failure is not the request's.
    }
  }

  /**
   * One request over a connected socket: a pooled keep-alive connection when one is idle,
   * else a new one. Nothing is written until the socket is connected; only then are the
   * tool call headers stamped, with the age plus the time spent getting the connection.
   */
  #exchange(spec: RequestSpec, signal: AbortSignal): Promise<RawAnswer> {
    let path = spec.path;
    if (spec.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(spec.query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) path += "?" + s;
    }
    const headers: Record<string, string> = {};
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (spec.contentType) headers["content-type"] = spec.contentType;
    if (spec.chatId) headers[CHAT_ID_HEADER] = spec.chatId;
    if (spec.body) headers["content-length"] = String(spec.body.length);
    const began = this.#clock.now();
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: this.#url.hostname,
        port: this.#url.port || 80,
        method: spec.method,
        path,
        headers,
        agent: this.#keepAlive,
      });
      let sent = false;
      const onAbort = () => {
        req.destroy();
        reject(signal.reason as Error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const send = () => {
        if (sent || signal.aborted) return;
        sent = true;
        if (spec.toolCall) {
          const { ageMs, ...rest } = spec.toolCall;
          const stamped = toolCallRequestHeaders(spec.toolCall.chatId, {
            ...rest,
            ageMs: ageMs + (this.#clock.now() - began),
          });
          for (const [name, value] of Object.entries(stamped)) req.setHeader(name, value);
        }
        req.end(spec.body);
      };
      req.once("socket", (s) => {
        if (s.connecting) s.once("connect", send);
        else send();
      });
      req.once("error", (err) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) return;
        const phase = sent ? "exchange" : "connect";
        const what = phase === "connect" ? "Cannot connect to" : "Lost the connection to";
        reject(
          new AgentConnectionError(`${what} the workspace agent: ${err.message}`, phase, {
            cause: err,
          }),
        );
      });
      req.once("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        // "close" follows both a full answer ("end" first) and a cut one (no "end").
        res.once("error", () => undefined);
        res.once("close", () => {
          signal.removeEventListener("abort", onAbort);
          if (signal.aborted) return;
          if (!res.complete) {
            reject(
              new AgentConnectionError(
                "Lost the connection to the workspace agent mid-answer.",
                "exchange",
              ),
            );
            return;
          }
          resolve({
            status: res.statusCode ?? 0,
            contentType: res.headers["content-type"],
            body: Buffer.concat(chunks),
            runAgeMs: parseRunAgeRaw(res),
          });
        });
      });
    });
  }
}

function parseRunAgeRaw(res: http.IncomingMessage): number {
  const name = RUN_AGE_HEADER.toLowerCase();
  const values: string[] = [];
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    if (res.rawHeaders[i]!.toLowerCase() === name) values.push(res.rawHeaders[i + 1]!);
  }
  return parseRunAgeHeader(values);
}

function parse(a: RawAnswer): unknown {
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
