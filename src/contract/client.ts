// The agent client chatd uses (CONTRACT.md 9): one typed method per route of the contract.
// It says what each request is and reads its answer; exchange.ts sends it, bounded and
// observed, and a transport (transport.ts) moves the bytes and stamps the tool call headers
// only once connected (age + time spent connecting), so waiting for a restarting agent never
// makes the age stale. It never follows a redirect, and every call is bounded.

import { realClock, type Clock } from "./clock.ts";
import {
  AgentExchange,
  DEFAULT_REQUEST_TIMEOUT_MS,
  parseJson,
  type AgentRequestRecord,
  type CallOptions,
  type RequestSpec,
  type ToolCall,
} from "./exchange.ts";
import type { ChatId } from "./ids.ts";
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

export class AgentClient {
  readonly #x: AgentExchange;

  constructor(options: AgentClientOptions) {
    const clock = options.clock ?? realClock;
    let transport: AgentTransport;
    if (options.transport) transport = options.transport;
    else if (options.baseUrl !== undefined)
      transport = new HttpTransport({
        baseUrl: options.baseUrl,
        clock,
        ...(options.allowAddress && { allowAddress: options.allowAddress }),
      });
    else throw new Error("An agent client needs a baseUrl or a transport.");
    this.#x = new AgentExchange({
      transport,
      token: options.token,
      clock,
      defaultTimeoutMs: options.defaultTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      onRequest: options.onRequest,
    });
  }

  /** Closes idle connections. */
  close(): void {
    this.#x.close();
  }

  // ---- one method per route ----------------------------------------------------

  /** Starts a process; with a tool call, its ID is the tool call UUID. */
  async startProcess(
    req: StartProcessRequest,
    scope: { toolCall?: ToolCall; chatId?: ChatId } = {},
    opts: CallOptions = {},
  ): Promise<StartProcessResponse & { runAgeMs: number }> {
    const a = await this.#x.json("POST", "/api/v0/processes/start", req, scope, opts);
    return { ...(parseJson(a) as StartProcessResponse), runAgeMs: a.runAgeMs };
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
    return parseJson(await this.#x.expectOk(spec, opts)) as ProcessOutputResponse;
  }

  async listProcesses(
    scope: ChatScope = {},
    opts: CallOptions = {},
  ): Promise<ListProcessesResponse> {
    const spec: RequestSpec = { method: "GET", path: "/api/v0/processes/list" };
    if (scope.chatId) spec.chatId = scope.chatId;
    return parseJson(await this.#x.expectOk(spec, opts)) as ListProcessesResponse;
  }

  async signalProcess(
    id: string,
    signal: "kill" | "terminate",
    scope: ChatScope = {},
    opts: CallOptions = {},
  ): Promise<MessageResponse> {
    const path = `/api/v0/processes/${encodeURIComponent(id)}/signal`;
    const spec = { route: "POST /api/v0/processes/{id}/signal", ...scope };
    return parseJson(await this.#x.json("POST", path, { signal }, spec, opts)) as MessageResponse;
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
    const a = await this.#x.json("POST", path, body, spec, opts);
    return { ...(parseJson(a) as CancelToolCallResponse), runAgeMs: a.runAgeMs };
  }

  async editFiles(
    req: EditFilesRequest,
    scope: { toolCall?: ToolCall; chatId?: ChatId } = {},
    opts: CallOptions = {},
  ): Promise<EditFilesResponse & { runAgeMs: number }> {
    const a = await this.#x.json("POST", "/api/v0/edit-files", req, scope, opts);
    return { ...(parseJson(a) as EditFilesResponse), runAgeMs: a.runAgeMs };
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
    const a = await this.#x.expectOk(spec, opts);
    return { ...(parseJson(a) as MessageResponse), runAgeMs: a.runAgeMs };
  }

  async readFile(
    path: string,
    o: { offset?: number; limit?: number } = {},
    opts: CallOptions = {},
  ): Promise<Buffer> {
    const spec: RequestSpec = { method: "GET", path: "/api/v0/read-file", query: { path, ...o } };
    return (await this.#x.expectOk(spec, opts)).body;
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
    return parseJson(await this.#x.expectOk(spec, opts)) as ReadFileLinesResponse;
  }

  async listDirectory(
    req: ListDirectoryRequest,
    opts: CallOptions = {},
  ): Promise<ListDirectoryResponse> {
    return parseJson(
      await this.#x.json("POST", "/api/v0/list-directory", req, {}, opts),
    ) as ListDirectoryResponse;
  }

  async info(opts: CallOptions = {}): Promise<InfoResponse> {
    return parseJson(
      await this.#x.expectOk({ method: "GET", path: "/api/v0/info" }, opts),
    ) as InfoResponse;
  }

  /** The workspace's environment and instruction files (an extension; 404 on older agents). */
  async context(opts: CallOptions = {}): Promise<ContextResponse> {
    return parseJson(
      await this.#x.expectOk({ method: "GET", path: "/api/v0/context" }, opts),
    ) as ContextResponse;
  }
}
