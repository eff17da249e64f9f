// The workspace agent's HTTP server: it mounts the contract's routes (CONTRACT.md 7) on the
// agent's router (http-router.ts: body limits, one error shape; http-edge.ts: token auth,
// origin and content-type refusals), with the tool call middleware on every side-effecting
// route.

import { randomUUID } from "node:crypto";
import os from "node:os";
import path from "node:path";
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
import {
  parseJsonBody,
  repeatedQuery,
  sendAnswer,
  type AgentRawRequest,
  type AgentResponse,
} from "./http-edge.ts";
import { AgentHttp, JSON_ROUTE } from "./http-router.ts";
import * as files from "./files/index.ts";
import { ProcessManager } from "./processes/index.ts";
import { cancelRoute } from "./toolcalls/cancel.ts";
import { withToolCalls, type Prepared, type RequestInput } from "./toolcalls/middleware.ts";
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
  /** Serves one request: node:http's, or HTTP/2's compatibility request (dial-out). */
  readonly handle: (req: AgentRawRequest, res: AgentResponse) => void;
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

  const app = new AgentHttp(clock, o.token);

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
  app.post("/api/v0/processes/start", withToolCalls(store, startRoute), JSON_ROUTE);

  app.get("/api/v0/processes/list", (request, res) =>
    sendAnswer(
      res,
      jsonAnswer(200, {
        processes: processes.list(request.chatId, (id, chatId) =>
          store.isCurrentProcess(id, chatId),
        ),
      }),
    ),
  );

  app.get("/api/v0/processes/:id/output", async (request, res) => {
    const id = request.params.id!;
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.once("close", onClose);
    const out = await processes.output(id, request.chatId, {
      wait: request.query.wait === "true",
      signal: gone.signal,
    });
    res.off("close", onClose);
    if (gone.signal.aborted) return; // the client went away: nothing is written
    sendAnswer(res, out ? jsonAnswer(200, out) : notFound(id));
  });

  app.post(
    "/api/v0/processes/:id/signal",
    (request, res) => {
      const req = parseJsonBody(request.body, SignalProcessRequest);
      if (!req.ok) return sendAnswer(res, req.answer);
      const id = request.params.id!;
      const result = processes.signal(id, request.chatId, req.value.signal);
      switch (result) {
        case "ok":
          return sendAnswer(
            res,
            jsonAnswer(200, { message: `Sent ${req.value.signal} to process "${id}".` }),
          );
        case "not_found":
          return sendAnswer(res, notFound(id));
        case "not_running":
          return sendAnswer(res, errorAnswer(409, `Process "${id}" is not running.`));
      }
    },
    JSON_ROUTE,
  );

  app.post("/api/v0/tool-calls/:id/cancel", cancelRoute(store, processes), JSON_ROUTE);

  // ---- files ---------------------------------------------------------------------------

  app.post(
    "/api/v0/edit-files",
    withToolCalls(store, (input) => {
      const req = files.parseEditFilesRequest(input.body);
      if (!req.ok) return reject(req.answer);
      return { kind: "run", run: () => files.applyEdits(req.value) };
    }),
    JSON_ROUTE,
  );

  app.post(
    "/api/v0/write-file",
    withToolCalls(store, (input) => {
      const repeated = repeatedQuery(input.query);
      if (repeated) return reject(repeated);
      const target = files.parseWritePath(single(input.query.path));
      if (!target.ok) return reject(target.answer);
      return { kind: "run", run: () => files.writeFile(target.value, input.body) };
    }),
    { bodyLimit: WRITE_FILE_BODY_LIMIT_BYTES },
  );

  app.get("/api/v0/read-file", async (request, res) =>
    sendAnswer(res, repeatedQuery(request.query) ?? (await files.readFile(singles(request.query)))),
  );

  app.get("/api/v0/read-file-lines", async (request, res) =>
    sendAnswer(
      res,
      repeatedQuery(request.query) ?? (await files.readFileLines(singles(request.query))),
    ),
  );

  app.post(
    "/api/v0/list-directory",
    async (request, res) => {
      const req = parseJsonBody(request.body, ListDirectoryRequest);
      if (!req.ok) return sendAnswer(res, req.answer);
      return sendAnswer(res, await files.listDirectory(req.value, homeDir));
    },
    JSON_ROUTE,
  );

  registerContextRoute(app, { dir, homeDir, env: o.env ?? process.env });

  app.get("/api/v0/info", (_request, res) =>
    sendAnswer(
      res,
      jsonAnswer(200, {
        version: AGENT_VERSION,
        api_version: AGENT_API_VERSION,
        started_at: startedAtIso,
        tool_calls: true,
        processes_running: processes.runningCount,
      } satisfies InfoResponse),
    ),
  );

  return {
    handle: app.handle,
    store,
    processes,
    listen: (host, port) => app.listen(host, port),
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

/** A query parameter's one value (repeatedQuery has refused repeats). */
function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function singles(query: Record<string, string | string[] | undefined>) {
  return Object.fromEntries(Object.entries(query).map(([k, v]) => [k, single(v)]));
}

function notFound(id: string): Answer {
  return errorAnswer(404, `Process "${id}" not found.`);
}
