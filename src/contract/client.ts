// The agent client chatd uses (CONTRACT.md 9): one typed method per route of the contract.
// It builds each request and reads its answer; a transport (transport.ts) moves the bytes and
// stamps the tool call headers only once connected (age + time spent connecting), so waiting
// for a restarting agent never makes the age stale. It never follows a redirect, and every
// call is bounded.

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
  ContextResponse,
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
import { HttpTransport, type AddressPolicy, type AgentTransport } from "./transport.ts";
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
  /** `http(s)://host:port` of the agent, reached over HTTP; or give `transport`. */
  baseUrl?: string;
  /** How requests reach the agent (an agent's dial-out connection); an HttpTransport of `baseUrl` by default. */
  transport?: AgentTransport;
  /** With `baseUrl`: checked against every address a new connection is about to use. */
  allowAddress?: AddressPolicy;
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
  readonly #transport: AgentTransport;
  readonly #token: string | undefined;
  readonly #clock: Clock;
  readonly #defaultTimeoutMs: number;
  readonly #onRequest: ((r: AgentRequestRecord) => void) | undefined;

  constructor(options: AgentClientOptions) {
    this.#clock = options.clock ?? realClock;
    if (options.transport) this.#transport = options.transport;
    else if (options.baseUrl !== undefined)
      this.#transport = new HttpTransport({
        baseUrl: options.baseUrl,
        clock: this.#clock,
        ...(options.allowAddress && { allowAddress: options.allowAddress }),
      });
    else throw new Error("An agent client needs a baseUrl or a transport.");
    this.#token = options.token;
    this.#defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#onRequest = options.onRequest;
  }

  /** Closes idle connections. */
  close(): void {
    this.#transport.close();
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

  /** The workspace's environment and instruction files (an extension; 404 on older agents). */
  async context(opts: CallOptions = {}): Promise<ContextResponse> {
    return parse(
      await this.#expectOk({ method: "GET", path: "/api/v0/context" }, opts),
    ) as ContextResponse;
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
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (spec.contentType) headers["content-type"] = spec.contentType;
    if (spec.chatId) headers[CHAT_ID_HEADER] = spec.chatId;
    if (spec.body) headers["content-length"] = String(spec.body.length);
    const toolCall = spec.toolCall;
    const a = await this.#transport.exchange(
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
