// `tether server`: the control plane in one process — the database (embedded PGlite by
// default, or Postgres), the worker that drives chats, the HTTP API, and the local workspace
// agent it supervises. `startServer` is also what tests run in-process.

import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { LanguageModel } from "ai";
import { createApi } from "../api/index.ts";
import type { Clock } from "../contract/index.ts";
import { AgentPool } from "../chatd/agents.ts";
import { pricesOf } from "../chatd/billing.ts";
import type { Chat } from "../chatd/chats.ts";
import { openDatabase, type Database } from "../chatd/db/index.ts";
import { replicaSecret } from "../chatd/replicas.ts";
import { agentRequestObserver, createChatdMetrics, type ChatdMetrics } from "../chatd/observe.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { DEFAULT_TOOL_RESULT_BUDGET_BYTES } from "../chatd/tools/index.ts";
import { Worker } from "../chatd/worker/worker.ts";
import {
  createLanguageModel,
  defaultModelSpec,
  parseModelSpec,
  type ProviderName,
} from "../model/index.ts";
import { parseListen } from "./listen.ts";
import { createLogger, DEFAULT_LOG_LEVEL, type LogLevel } from "./log.ts";
import { stopOnSignals } from "./signals.ts";
import { LocalAgentSupervisor, type LocalAgent } from "./local-agent.ts";
import { ensureDefaultModel, upsertLocalWorkspace } from "./setup.ts";
import { ensureWebBuilt } from "./web-build.ts";

export const DEFAULT_AGENT_ANSWER_TIMEOUT_MS = 60_000;

export interface ServerOptions {
  listen: string;
  /** The base URL other replicas reach this one at (default: the listen URL). */
  advertiseUrl?: string;
  postgresUrl?: string;
  dataDir: string;
  workspaceDir: string;
  localWorkspace: boolean;
  model?: string;
  modelBaseUrl?: string;
  leaseMs?: number;
  heartbeatMs?: number;
  agentAnswerTimeoutMs?: number;
  /** Bound on each task attempt (the Worker's attemptTimeoutMs); 15 minutes when unset. */
  taskTimeoutMs?: number;
  clock?: Clock;
  /** Logs go to stderr unless false. */
  log?: boolean;
  /** The least level logged (default info). */
  logLevel?: LogLevel;
  /** A browser session unused this long ends (ApiOptions.sessionIdleMs; 7 days by default). */
  sessionIdleMs?: number;
  /** Behind a reverse proxy: client address and https from X-Forwarded-* (ApiOptions). */
  trustProxy?: boolean;
  /** The built web UI served at `/` (runServer builds it; in-process tests leave it unset). */
  webRoot?: string;
}

export interface RunningServer {
  url: string;
  db: Database;
  worker: Worker;
  /** This replica's metrics, served at GET /metrics. */
  metrics: ChatdMetrics;
  localAgent: LocalAgent | undefined;
  /**
   * Graceful stop: stop accepting (open streams end), stop waiting (agent work goes on), release
   * leases so another replica acquires at once, deregister, stop the local agent, close the db.
   */
  close(o?: { keepLocalAgent?: boolean }): Promise<void>;
}

export async function startServer(o: ServerOptions): Promise<RunningServer> {
  const log = createLogger({
    level: o.log === false ? "silent" : (o.logLevel ?? DEFAULT_LOG_LEVEL),
  });
  const { host, port } = parseListen(o.listen);
  await mkdir(o.dataDir, { recursive: true });
  const db = await openDatabase(
    o.postgresUrl ? { postgresUrl: o.postgresUrl } : { dataDir: path.join(o.dataDir, "db") },
  );
  const spec = o.model ?? defaultModelSpec();
  await ensureDefaultModel(db, parseModelSpec(spec), o.modelBaseUrl, o.model !== undefined);

  let supervisor: LocalAgentSupervisor | undefined;
  let localAgent: LocalAgent | undefined;
  if (o.localWorkspace) {
    supervisor = new LocalAgentSupervisor(o.dataDir, path.resolve(o.workspaceDir), async (a) => {
      await upsertLocalWorkspace(db, a.url, a.token);
      log.info({ url: a.url, pid: a.pid, adopted: a.adopted }, "local workspace agent");
    });
    localAgent = await supervisor.start();
  }

  // Keyed by config ID and update time: a changed config (PATCH) makes a new model.
  const models = new Map<string, LanguageModel>();
  const buffer = new StreamBuffer();
  // Created per server and passed down: two servers in one process share no values.
  const metrics = createChatdMetrics(db);
  // The worker binds its ID as `replica` on its lines; agent requests are logged the same way.
  const workerId = randomUUID();
  const onRequest = agentRequestObserver(metrics, log.child({ replica: workerId }));
  // One client per agent for the worker's tool calls and the API's process reads alike.
  const agents = new AgentPool(db, { onRequest });
  const worker = new Worker({
    db,
    buffer,
    workerId,
    log,
    metrics,
    ...(o.clock && { clock: o.clock }),
    ...(o.leaseMs !== undefined && { leaseMs: o.leaseMs }),
    ...(o.heartbeatMs !== undefined && { heartbeatMs: o.heartbeatMs }),
    ...(o.taskTimeoutMs !== undefined && { attemptTimeoutMs: o.taskTimeoutMs }),
    agentAnswerTimeoutMs: o.agentAnswerTimeoutMs ?? DEFAULT_AGENT_ANSWER_TIMEOUT_MS,
    toolResultBudgetBytes: DEFAULT_TOOL_RESULT_BUDGET_BYTES,
    resolveModel: async (chat: Chat) => {
      const r = await db.query<{
        id: string;
        provider: string;
        model: string;
        base_url: string | null;
        api_key: string | null;
        updated_at: Date;
        input_price_per_mtok_micros: string | number;
        output_price_per_mtok_micros: string | number;
      }>(
        chat.modelConfigId
          ? "SELECT * FROM model_configs WHERE id = $1"
          : "SELECT * FROM model_configs WHERE is_default ORDER BY created_at DESC LIMIT 1",
        chat.modelConfigId ? [chat.modelConfigId] : [],
      );
      const c = r.rows[0];
      if (!c)
        throw new Error(
          "No model is configured: start the server with --model, or add one with POST /api/v1/models.",
        );
      const key = `${c.id} ${c.updated_at.toISOString()}`;
      let m = models.get(key);
      if (!m) {
        m = createLanguageModel({
          provider: c.provider as ProviderName,
          model: c.model,
          ...(c.base_url && { baseUrl: c.base_url }),
          ...(c.api_key && { apiKey: c.api_key }),
        });
        models.set(key, m);
      }
      return { model: m, prices: pricesOf(c) };
    },
    resolveAgent: async (chat: Chat) =>
      chat.workspaceId ? agents.forWorkspace(chat.workspaceId) : undefined,
  });

  // A chat that names no model or workspace gets the `is_default` ones (the API's fallback).
  // Other replicas relay this one's live parts through its internal route, with the secret.
  const secret = await replicaSecret(db);
  const api = await createApi({
    db,
    log: log.child({ replica: workerId }),
    buffer,
    metrics: metrics.registry,
    replica: { workerId: worker.id, secret },
    agents,
    ...(o.trustProxy && { trustProxy: true }),
    ...(o.sessionIdleMs !== undefined && { sessionIdleMs: o.sessionIdleMs }),
    ...(o.webRoot !== undefined && { webRoot: o.webRoot }),
  });
  const url = await api.listen({ host, port });
  // With the embedded database this process is the only replica: take over every unfinished
  // chat at once instead of waiting for the old leases to expire.
  await worker.start({ takeOverAll: !o.postgresUrl, address: o.advertiseUrl ?? url });
  // Which replica owns which chat (chats.worker_id) is only readable with this ID.
  log.info({ workerId: worker.id }, "worker started");

  return {
    url,
    db,
    worker,
    metrics,
    localAgent,
    async close(c = {}) {
      await api.close();
      await worker.stop();
      if (!c.keepLocalAgent) await supervisor?.stop();
      agents.close();
      await db.close();
    },
  };
}

export async function runServer(o: ServerOptions): Promise<void> {
  const log = createLogger({ level: o.logLevel ?? DEFAULT_LOG_LEVEL });
  const webRoot = o.webRoot ?? (await ensureWebBuilt(log));
  const server = await startServer({ ...o, webRoot });
  process.stdout.write(`listening on ${server.url}\n`);
  stopOnSignals(() => server.close());
}
