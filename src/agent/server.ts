// The workspace agent's HTTP server: it mounts the contract's routes (CONTRACT.md 7) on the
// agent's Fastify instance (http-edge.ts: token auth, origin and content-type refusals, body
// limits, one error shape), with the tool call middleware on every side-effecting route.

import { randomUUID } from "node:crypto";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import {
  ListDirectoryRequest,
  SignalProcessRequest,
  StartProcessRequest,
  realClock,
  type Clock,
  type InfoResponse,
  type StartProcessResponse,
} from "../contract/index.ts";
import { codedAnswer, errorAnswer, jsonAnswer, type Answer } from "./answer.ts";
import { registerContextRoute } from "./context.ts";
import { agentFastify, JSON_ROUTE, parseJsonBody, repeatedQuery } from "./http-edge.ts";
import * as files from "./files/index.ts";
import { ProcessManager } from "./processes/index.ts";
import { cancelRoute } from "./toolcalls/cancel.ts";
import {
  requestState,
  sendAnswer,
  withToolCalls,
  type Prepared,
  type RequestInput,
} from "./toolcalls/middleware.ts";
import { ToolCallStore } from "./toolcalls/store.ts";

export const AGENT_VERSION = "0.1.0";
export const AGENT_API_VERSION = "0";
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

/** The start body with `command` optional, so a missing one gets its own message. */
const START_BODY = StartProcessRequest.extend({ command: z.string().optional() });

function reject(answer: Answer): Prepared {
  return { kind: "answer", answer };
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
