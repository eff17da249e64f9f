// The workspace agent's HTTP server: it mounts the contract's routes (CONTRACT.md 7) on
// Fastify, with the tool call middleware on every side-effecting route, bearer-token auth,
// body limits, and one error shape `{message, detail?}` for everything that goes wrong.

import { randomUUID, timingSafeEqual } from "node:crypto";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { z } from "zod";
import {
  ListDirectoryRequest,
  SignalProcessRequest,
  StartProcessRequest,
  parseChatIdHeader,
  realClock,
  type Clock,
  type InfoResponse,
  type StartProcessResponse,
} from "../contract/index.ts";
import { answerMalformedRequest } from "../contract/malformed-request.ts";
import { codedAnswer, errorAnswer, jsonAnswer, type Answer } from "./answer.ts";
import { registerContextRoute } from "./context.ts";
import * as files from "./files/index.ts";
import { ProcessManager } from "./processes/index.ts";
import { cancelRoute } from "./toolcalls/cancel.ts";
import {
  requestState,
  sendAnswer,
  withToolCalls,
  distinctHeaders,
  type AgentRequestState,
  type Prepared,
  type RequestInput,
} from "./toolcalls/middleware.ts";
import { ToolCallStore } from "./toolcalls/store.ts";

export const AGENT_VERSION = "0.1.0";
export const AGENT_API_VERSION = "0";
/** Largest JSON body any route takes. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;
/** Largest write-file body. */
export const WRITE_FILE_BODY_LIMIT_BYTES = 64 * 1024 * 1024;

export interface AgentServerOptions {
  /** The workspace directory: the default working directory of processes. */
  dir: string;
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** Decides every time rule; the real clock by default. */
  clock?: Clock;
  /** The base environment of processes; `process.env` by default. */
  env?: NodeJS.ProcessEnv;
  /** The `home` of list-directory; `os.homedir()` by default. */
  homeDir?: string;
  /** How long a background child may hold a finished shell's pipes (ms). */
  exitGraceMs?: number;
}

export interface AgentServer {
  app: FastifyInstance;
  store: ToolCallStore;
  processes: ProcessManager;
  /** Listens and answers the URL it listens on, `http://HOST:PORT`. */
  listen(host: string, port: number): Promise<string>;
  /** Kills every process it started, then stops serving. */
  close(): Promise<void>;
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
export const JSON_ROUTE = { config: { json: true } } as const;

/** The start body with `command` optional, so a missing one gets its own message. */
const START_BODY = StartProcessRequest.extend({ command: z.string().optional() });

function reject(answer: Answer): Prepared {
  return { kind: "answer", answer };
}

/**
 * The Fastify instance every agent route runs on: raw-byte bodies, the request's entry
 * instant and chat context, token auth, and the `{message, detail?}` error shape.
 */
/**
 * Routes parse their bodies with zod and declare no Fastify schema, so Fastify's default
 * compilers (ajv, fast-json-stringify: about 30 ms of CPU at every start here) are never
 * needed. These refuse a schema.
 */
const NO_FASTIFY_SCHEMAS = {
  compilersFactory: {
    buildValidator: () => () => {
      throw new Error("Agent routes parse their bodies with zod, not a schema.");
    },
    buildSerializer: () => () => {
      throw new Error("Agent routes send plain JSON; a response schema is not supported.");
    },
  },
};

export function agentFastify(clock: Clock, tokenText?: string): FastifyInstance {
  const token = tokenText ? Buffer.from(tokenText) : undefined;
  const app = Fastify({
    logger: false,
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    return503OnClosing: true,
    schemaController: NO_FASTIFY_SCHEMAS,
    clientErrorHandler: (err, socket) =>
      answerMalformedRequest(err, socket, (m) => ({ message: m.message, code: m.code })),
  });
  app.decorateRequest("agent", null);

  // Every route takes its body as raw bytes: the middleware hashes and hands on exactly these.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  app.addHook("onRequest", async (request, reply) => {
    // The clock is read once, when the request enters, before the body is read.
    const state: AgentRequestState = { enteredAt: clock.now(), chatId: undefined };
    (request as unknown as { agent: AgentRequestState }).agent = state;
    // The agent serves only its server, never a browser: a page's request carries an Origin
    // (chatd's, and the dial-out connection's, never do), so it is refused before anything.
    if (request.headers.origin !== undefined) {
      return sendAnswer(
        reply,
        codedAnswer(
          "origin_refused",
          "Requests from web pages are refused.",
          "The workspace agent answers only its server; a request with an Origin header comes from a browser.",
        ),
      );
    }
    if (token && !authorized(request, token)) {
      return sendAnswer(
        reply,
        errorAnswer(401, "Missing or wrong agent token.", "Send Authorization: Bearer <token>."),
      );
    }
    const chat = parseChatIdHeader(distinctHeaders(request.raw));
    if (chat.kind === "error")
      return sendAnswer(reply, errorAnswer(400, "Invalid Coder-Chat-Id header.", chat.detail));
    if (chat.kind === "chat") state.chatId = chat.chatId;
    const config = request.routeOptions.config as { json?: boolean } | undefined;
    if (config?.json && !jsonContentType(request)) {
      return sendAnswer(
        reply,
        codedAnswer(
          "unsupported_media_type",
          "Send the request body as Content-Type: application/json.",
          `got ${JSON.stringify(request.headers["content-type"] ?? "no Content-Type")}`,
        ),
      );
    }
    return undefined;
  });

  app.setNotFoundHandler((request, reply) =>
    sendAnswer(
      reply,
      errorAnswer(404, `Route ${request.method} ${request.url.split("?")[0]} not found.`),
    ),
  );
  app.setErrorHandler(
    (err: { statusCode?: number; code?: string; message: string }, _request, reply) => {
      if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
        return sendAnswer(reply, errorAnswer(413, "Request body is too large.", err.message));
      }
      if (!err.statusCode || err.statusCode >= 500) {
        process.stderr.write(
          `${JSON.stringify({ level: "error", msg: "agent request failed", err: String((err as Error).stack ?? err.message) })}\n`,
        );
      }
      const status =
        err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      return sendAnswer(
        reply,
        errorAnswer(status, status === 500 ? "Internal error." : err.message),
      );
    },
  );

  return app;
}

export async function createAgentServer(o: AgentServerOptions): Promise<AgentServer> {
  const clock = o.clock ?? realClock;
  const dir = path.resolve(o.dir);
  const store = new ToolCallStore(clock);
  const processes = new ProcessManager({
    clock,
    defaultDir: dir,
    ...(o.env && { env: o.env }),
    ...(o.exitGraceMs !== undefined && { exitGraceMs: o.exitGraceMs }),
  });
  const startedAtIso = new Date().toISOString();
  const homeDir = o.homeDir ?? os.homedir();

  const app = agentFastify(clock, o.token);

  const bodyOf = (request: FastifyRequest) =>
    Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);

  // ---- processes -----------------------------------------------------------------------

  const startRoute = (input: RequestInput): Prepared => {
    const req = parseJsonBody(input.body, START_BODY);
    if (!req.ok) return reject(req.answer);
    const { command, workdir, env, background } = req.value;
    if (!command) return reject(errorAnswer(400, "Command is required."));
    const nul = nulField(req.value);
    if (nul !== undefined) {
      return reject(
        codedAnswer(
          "nul_in_input",
          `The start request's ${nul} contains a NUL byte, which no command, directory or environment variable can hold. Remove it.`,
        ),
      );
    }
    return {
      kind: "run",
      run: async (toolCall) => {
        const id = toolCall?.uuid ?? randomUUID();
        const started = await processes.start({
          id,
          command,
          startedAt: input.enteredAt,
          ...(input.chatId && { chatId: input.chatId }),
          ...(workdir !== undefined && { workdir: path.resolve(dir, workdir) }),
          ...(env && { env }),
          ...(background !== undefined && { background }),
        });
        if (!started.ok) return errorAnswer(500, started.message, started.detail);
        return jsonAnswer(200, { id, started: true } satisfies StartProcessResponse);
      },
    };
  };
  app.post("/api/v0/processes/start", JSON_ROUTE, withToolCalls(store, startRoute));

  app.get("/api/v0/processes/list", (request, reply) =>
    sendAnswer(
      reply,
      jsonAnswer(200, {
        processes: processes.list(requestState(request).chatId, (id, chatId) =>
          store.isCurrentProcess(id, chatId),
        ),
      }),
    ),
  );

  app.get<{ Params: { id: string }; Querystring: { wait?: string } }>(
    "/api/v0/processes/:id/output",
    async (request, reply) => {
      const gone = new AbortController();
      const onClose = () => gone.abort();
      reply.raw.once("close", onClose);
      const out = await processes.output(request.params.id, requestState(request).chatId, {
        wait: request.query.wait === "true",
        signal: gone.signal,
      });
      reply.raw.off("close", onClose);
      if (gone.signal.aborted) return reply.hijack();
      return sendAnswer(reply, out ? jsonAnswer(200, out) : notFound(request.params.id));
    },
  );

  app.post<{ Params: { id: string } }>(
    "/api/v0/processes/:id/signal",
    JSON_ROUTE,
    (request, reply) => {
      const req = parseJsonBody(bodyOf(request), SignalProcessRequest);
      if (!req.ok) return sendAnswer(reply, req.answer);
      const { id } = request.params;
      const result = processes.signal(id, requestState(request).chatId, req.value.signal);
      switch (result) {
        case "ok":
          return sendAnswer(
            reply,
            jsonAnswer(200, { message: `Sent ${req.value.signal} to process "${id}".` }),
          );
        case "not_found":
          return sendAnswer(reply, notFound(id));
        case "not_running":
          return sendAnswer(reply, errorAnswer(409, `Process "${id}" is not running.`));
      }
    },
  );

  app.post("/api/v0/tool-calls/:id/cancel", JSON_ROUTE, cancelRoute(store, processes));

  // ---- files ---------------------------------------------------------------------------

  app.post(
    "/api/v0/edit-files",
    JSON_ROUTE,
    withToolCalls(store, (input) => {
      const req = files.parseEditFilesRequest(input.body);
      if (!req.ok) return reject(req.answer);
      return { kind: "run", run: () => files.applyEdits(req.value) };
    }),
  );

  app.post(
    "/api/v0/write-file",
    { bodyLimit: WRITE_FILE_BODY_LIMIT_BYTES },
    withToolCalls(store, (input) => {
      const repeated = repeatedQuery(input.query);
      if (repeated) return reject(repeated);
      const target = files.parseWritePath(input.query.path);
      if (!target.ok) return reject(target.answer);
      return { kind: "run", run: () => files.writeFile(target.value, input.body) };
    }),
  );

  app.get<{ Querystring: Record<string, string | undefined> }>(
    "/api/v0/read-file",
    async (request, reply) =>
      sendAnswer(reply, repeatedQuery(request.query) ?? (await files.readFile(request.query))),
  );

  app.get<{ Querystring: Record<string, string | undefined> }>(
    "/api/v0/read-file-lines",
    async (request, reply) =>
      sendAnswer(reply, repeatedQuery(request.query) ?? (await files.readFileLines(request.query))),
  );

  app.post("/api/v0/list-directory", JSON_ROUTE, async (request, reply) => {
    const req = parseJsonBody(bodyOf(request), ListDirectoryRequest);
    if (!req.ok) return sendAnswer(reply, req.answer);
    return sendAnswer(reply, await files.listDirectory(req.value, homeDir));
  });

  registerContextRoute(app, { dir, homeDir, env: o.env ?? process.env });

  app.get("/api/v0/info", (_request, reply) =>
    sendAnswer(
      reply,
      jsonAnswer(200, {
        version: AGENT_VERSION,
        api_version: AGENT_API_VERSION,
        started_at: startedAtIso,
        tool_calls: true,
        processes_running: processes.runningCount,
      } satisfies InfoResponse),
    ),
  );

  await app.ready();

  return {
    app,
    store,
    processes,
    async listen(host, port) {
      await app.listen({ host, port });
      const addr = app.server.address();
      if (addr === null || typeof addr === "string")
        throw new Error("The agent is not listening on TCP.");
      const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      return `http://${h}:${addr.port}`;
    },
    async close() {
      await processes.closeAll();
      await app.close();
    },
  };
}

/**
 * A 400 naming the first query parameter given more than once (the query parser makes it an
 * array); undefined when every parameter has one value.
 */
export function repeatedQuery(query: unknown): Answer | undefined {
  if (typeof query !== "object" || query === null) return undefined;
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

/** The name of the first start field holding a NUL byte (no program can take one), if any. */
function nulField(v: { command?: string; workdir?: string; env?: Record<string, string> }) {
  if (v.command?.includes("\0")) return "command";
  if (v.workdir?.includes("\0")) return "workdir";
  for (const [k, value] of Object.entries(v.env ?? {})) {
    if (k.includes("\0") || value.includes("\0")) return `env.${JSON.stringify(k)}`;
  }
  return undefined;
}

function notFound(id: string): Answer {
  return errorAnswer(404, `Process "${id}" not found.`);
}

/**
 * A JSON route's Content-Type: `application/json` (parameters allowed), or none at all on a
 * request without a body (a bodiless cancel is `{}`). Anything else, `text/plain` above all
 * (a form or a no-CORS fetch sends it without a preflight), or a repeated one, is refused.
 */
function jsonContentType(request: FastifyRequest): boolean {
  const types = distinctHeaders(request.raw)["content-type"];
  // Node keeps only the first of repeated Content-Types: two are ambiguous, so neither is taken.
  if (types !== undefined && types.length > 1) return false;
  const type = request.headers["content-type"];
  if (type === undefined) {
    const length = request.headers["content-length"];
    return request.headers["transfer-encoding"] === undefined && (length ?? "0") === "0";
  }
  return type.split(";")[0]!.trim().toLowerCase() === "application/json";
}

function authorized(request: FastifyRequest, token: Buffer): boolean {
  const values = distinctHeaders(request.raw).authorization;
  if (values?.length !== 1) return false;
  const m = /^Bearer (.+)$/.exec(values[0]!);
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  return given.length === token.length && timingSafeEqual(given, token);
}
