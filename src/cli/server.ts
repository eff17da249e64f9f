// `tether server`: the control plane in one process — the database (embedded PGlite by
// default, or Postgres), the worker that drives chats, the HTTP API, and the local workspace
// agent it supervises. `startServer` is also what tests run in-process.

import { randomUUID } from "node:crypto";
import path from "node:path";
import type { DestinationStream } from "pino";
import { createApi } from "../api/index.ts";
import type { Clock } from "../contract/index.ts";
import { ConfigCache } from "../chatd/config-cache.ts";
import { AgentPool } from "../chatd/agents.ts";
import { AgentHub, type AgentHubOptions } from "../chatd/dialout/index.ts";
import type { Chat } from "../chatd/chats.ts";
import { openDatabase, type Database } from "../chatd/db/index.ts";
import { replicaSecret } from "../chatd/replicas.ts";
import {
  createSecretBox,
  purgeOldRowVersions,
  sealAtRest,
  SecretOpenError,
} from "../chatd/secrets/index.ts";
import { agentRequestObserver, createChatdMetrics, type ChatdMetrics } from "../chatd/observe.ts";
import { modelResolver } from "../chatd/model-configs.ts";
import { MessageFeed } from "../chatd/message-feed.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { DEFAULT_TOOL_RESULT_BUDGET_BYTES } from "../chatd/tools/index.ts";
import { DEFAULT_HEARTBEAT_MS, DEFAULT_LEASE_MS, Worker } from "../chatd/worker/worker.ts";
import { WorkspaceServices } from "../workspaces/index.ts";
import { defaultModelSpec, parseModelSpec } from "../model/index.ts";
import { parseListen } from "./listen.ts";
import { startIdleGc } from "./idle-gc.ts";
import { createLogger, DEFAULT_LOG_LEVEL, type LogLevel } from "./log.ts";
import { stopOnSignals } from "./signals.ts";
import { LocalAgentSupervisor, type LocalAgent } from "./local-agent.ts";
import {
  checkDataDirOutsideWorkspace,
  loadSecretKeys,
  prepareDataDir,
  restrictModes,
  ServerConfigError,
} from "./server-state.ts";
import { ensureDefaultModel, hasLocalWorkspace, upsertLocalWorkspace } from "./setup.ts";
import { ensureWebBuilt } from "./web-build.ts";

export const DEFAULT_AGENT_ANSWER_TIMEOUT_MS = 60_000;

export interface ServerOptions {
  listen: string;
  /** The base URL other replicas reach this one at (default: the listen URL). */
  advertiseUrl?: string;
  /**
   * The base URL dial-out agents dial (`tether agent --server`, a template's tether_server_url);
   * the listen URL by default.
   */
  accessUrl?: string;
  /** Test-sized timings of dial-out agent connections (pings, registry polls). */
  agentHub?: Pick<AgentHubOptions, "routePollMs" | "reconcileMs" | "session">;
  postgresUrl?: string;
  /** State (the embedded database, the local agent's file and log, the generated key): 0700. */
  dataDir: string;
  /** The key sealing secrets at rest, as TETHER_SECRET_KEY holds it (32 bytes, base64 or hex). */
  secretKey?: string;
  /** A file holding that key (--secret-key-file). */
  secretKeyFile?: string;
  /** Keys being rotated out (TETHER_SECRET_KEY_OLD): what they sealed is re-sealed at start. */
  oldSecretKeys?: string;
  /** A file holding an old key (--old-secret-key-file). */
  oldSecretKeyFile?: string;
  /**
   * The umask the local agent and its commands get (runServer: the one the server was started
   * with, before it made its own 0o077); unset, they inherit the server's.
   */
  childUmask?: number;
  workspaceDir: string;
  localWorkspace: boolean;
  model?: string;
  modelBaseUrl?: string;
  leaseMs?: number;
  heartbeatMs?: number;
  agentAnswerTimeoutMs?: number;
  /** Bound on each task attempt (the Worker's attemptTimeoutMs); 15 minutes when unset. */
  taskTimeoutMs?: number;
  /**
   * A task failing this long in a row gives up (the Worker's retryLimitMs): the turn ends in
   * error. 10 minutes (RETRY_LIMIT_MS) when unset.
   */
  retryLimitMs?: number;
  clock?: Clock;
  /** Logs go to stderr unless false. */
  log?: boolean;
  /** The least level logged (default info). */
  logLevel?: LogLevel;
  /** Where log lines go (default stderr; tests capture them). */
  logDestination?: DestinationStream;
  /** A browser session unused this long ends (ApiOptions.sessionIdleMs; 7 days by default). */
  sessionIdleMs?: number;
  /** Behind a reverse proxy: client address and https from X-Forwarded-* (ApiOptions). */
  trustProxy?: boolean;
  /** The built web UI served at `/` (runServer builds it; in-process tests leave it unset). */
  webRoot?: string;
  /** How often idle template workspaces are looked for (default 10 s; tests use less). */
  lifecycleIntervalMs?: number;
  /** Called on each API request and each agent request's end (runServer: the idle GC). */
  onActivity?: () => void;
}

export interface RunningServer {
  url: string;
  db: Database;
  worker: Worker;
  /** This replica's metrics, served at GET /metrics. */
  metrics: ChatdMetrics;
  localAgent: LocalAgent | undefined;
  /** The URL agents dial (`--access-url`, else the listen URL): what templates hand agents. */
  accessUrl: string;
  /** This replica's dial-out agent connections. */
  agentHub: AgentHub;
  /** The agent clients the worker and the API share (`agentStatus` for dial-out agents). */
  agents: AgentPool;
  /**
   * Graceful stop: stop accepting (open streams end), stop waiting (agent work goes on), release
   * leases so another replica acquires at once, deregister, stop the local agent, close the db.
   */
  close(o?: { keepLocalAgent?: boolean }): Promise<void>;
}

export async function startServer(o: ServerOptions): Promise<RunningServer> {
  const log = createLogger({
    level: o.log === false ? "silent" : (o.logLevel ?? DEFAULT_LOG_LEVEL),
    ...(o.logDestination && { destination: o.logDestination }),
  });
  const { host, port } = parseListen(o.listen);
  const workspaceDir = path.resolve(o.workspaceDir);
  if (o.localWorkspace) await checkDataDirOutsideWorkspace(o.dataDir, workspaceDir);
  await prepareDataDir(o.dataDir);
  const secrets = createSecretBox(
    await loadSecretKeys({
      key: o.secretKey,
      keyFile: o.secretKeyFile,
      oldKeys: o.oldSecretKeys,
      oldKeyFile: o.oldSecretKeyFile,
      embeddedDataDir: o.postgresUrl ? undefined : o.dataDir,
    }),
  );
  // The local agent starts first: its process start and its warm-up (AGENT_WARMUP_MS) take
  // seconds, which overlap the database's open instead of following it.
  const supervisor = o.localWorkspace
    ? new LocalAgentSupervisor({
        dataDir: o.dataDir,
        workspaceDir,
        secrets,
        ...(o.childUmask !== undefined && { umask: o.childUmask }),
        onChange: async (a) => {
          await upsertLocalWorkspace(db, a.url, a.token, secrets);
          log.info({ url: a.url, pid: a.pid, adopted: a.adopted }, "local workspace agent");
        },
      })
    : undefined;
  supervisor?.launch().catch(() => undefined); // its failure is start()'s, below
  let db: Database;
  try {
    db = await openDatabase(
      o.postgresUrl ? { postgresUrl: o.postgresUrl } : { dataDir: path.join(o.dataDir, "db") },
    );
  } catch (err) {
    await supervisor?.stop();
    throw err;
  }
  // Other replicas relay this one's live parts through its internal route, with the secret.
  let secret: string;
  try {
    // PGlite writes the files of a new database world-writable: every start restricts them.
    if (!o.postgresUrl) restrictModes(o.dataDir);
    // Plaintext from an older database is sealed; what an old key sealed is sealed again.
    const sealed = await sealAtRest(db, secrets);
    if (sealed.sealed + sealed.resealed > 0) {
      await purgeOldRowVersions(db, sealed.tables);
      log.info({ sealed: sealed.sealed, resealed: sealed.resealed }, "secrets sealed at rest");
    }
    for (const u of sealed.unopenable)
      log.warn(
        { slot: u.slot, key_id: u.keyId },
        "a stored secret is sealed with a key this server does not have; set it in TETHER_SECRET_KEY_OLD",
      );
    // Before anything starts: a server without the key its replicas use refuses here.
    secret = await replicaSecret(db, secrets);
  } catch (err) {
    await supervisor?.stop();
    await db.close();
    if (err instanceof SecretOpenError) throw new ServerConfigError(err.message);
    throw err;
  }
  let localAgent: LocalAgent | undefined;
  let localAgentStarted: Promise<LocalAgent> | undefined;
  try {
    const spec = o.model ?? defaultModelSpec();
    await ensureDefaultModel(db, parseModelSpec(spec), o.modelBaseUrl, o.model !== undefined);
    localAgentStarted = supervisor?.start();
    localAgentStarted?.catch(() => undefined); // awaited below
    // On a first start there is no local workspace yet: a chat made before its agent answers
    // would get none, so the API waits for it (below, it need not).
    if (localAgentStarted && !(await hasLocalWorkspace(db))) localAgent = await localAgentStarted;
  } catch (err) {
    await supervisor?.stop();
    await db.close();
    throw err;
  }

  const buffer = new StreamBuffer();
  // The messages this replica's worker and API commit, for its streams (message-feed.ts).
  const feed = new MessageFeed(o.clock);
  // Created per server and passed down: two servers in one process share no values.
  const metrics = createChatdMetrics(db);
  // The worker binds its ID as `replica` on its lines; agent requests are logged the same way.
  const workerId = randomUUID();
  const observe = agentRequestObserver(metrics, log.child({ replica: workerId }));
  const onRequest: typeof observe = (r) => {
    o.onActivity?.();
    observe(r);
  };
  // Agents that dial out connect to this replica's hub; any replica reaches them through it.
  const agentHub = new AgentHub({
    db,
    workerId,
    secret,
    log: log.child({ replica: workerId }),
    ...(o.clock && { clock: o.clock }),
    ...o.agentHub,
  });
  // One client per agent for the worker's tool calls and the API's process reads alike.
  // Model configurations and agent addresses, held until a trigger says they changed.
  const config = new ConfigCache(o.clock);
  await config.listen(db);
  const agents = new AgentPool(db, { secrets, onRequest, dialout: agentHub, config });
  // Template workspaces: builds, idle stop, and the wait of a turn for its workspace.
  const workspaces = new WorkspaceServices({
    db,
    secrets,
    workerId,
    agents,
    log: log.child({ replica: workerId }),
    dataDir: o.dataDir,
    leaseMs: o.leaseMs ?? DEFAULT_LEASE_MS,
    heartbeatMs: o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    ...(o.lifecycleIntervalMs !== undefined && { lifecycleIntervalMs: o.lifecycleIntervalMs }),
    ...(o.clock && { clock: o.clock }),
  });
  const worker = new Worker({
    workspaceReady: workspaces.workspaceReady,
    db,
    buffer,
    feed,
    workerId,
    log,
    metrics,
    ...(o.clock && { clock: o.clock }),
    ...(o.leaseMs !== undefined && { leaseMs: o.leaseMs }),
    ...(o.heartbeatMs !== undefined && { heartbeatMs: o.heartbeatMs }),
    ...(o.taskTimeoutMs !== undefined && { attemptTimeoutMs: o.taskTimeoutMs }),
    ...(o.retryLimitMs !== undefined && { retryLimitMs: o.retryLimitMs }),
    agentAnswerTimeoutMs: o.agentAnswerTimeoutMs ?? DEFAULT_AGENT_ANSWER_TIMEOUT_MS,
    toolResultBudgetBytes: DEFAULT_TOOL_RESULT_BUDGET_BYTES,
    resolveModel: modelResolver(db, config, secrets),
    resolveAgent: async (chat: Chat) =>
      chat.workspaceId ? agents.forWorkspace(chat.workspaceId) : undefined,
    agentForUser: (workspaceId, userId) => agents.forUser(workspaceId, userId),
  });

  // A chat that names no model or workspace gets the `is_default` ones (the API's fallback).
  const api = await createApi({
    db,
    secrets,
    log: log.child({ replica: workerId }),
    buffer,
    feed,
    metrics: metrics.registry,
    replica: { workerId: worker.id, secret },
    localClaim: (newChat) => worker.localClaim(newChat),
    agents,
    agentHub,
    workspaces,
    ...(o.trustProxy && { trustProxy: true }),
    ...(o.sessionIdleMs !== undefined && { sessionIdleMs: o.sessionIdleMs }),
    ...(o.webRoot !== undefined && { webRoot: o.webRoot }),
  });
  // The API answers from here. A local workspace registered by an earlier start keeps its old
  // agent address until the new agent answers; the worker starts only after that, so no tool
  // call goes to the old one (the API only reads through it: process output, health).
  let url: string;
  try {
    url = await api.listen({ host, port });
    if (o.onActivity) api.server.on("request", o.onActivity);
    localAgent = await localAgentStarted;
  } catch (err) {
    await api.close();
    await supervisor?.stop();
    agents.close();
    await db.close();
    throw err;
  }
  // With the embedded database this process is the only replica: take over every unfinished
  // chat at once instead of waiting for the old leases to expire.
  await worker.start({ takeOverAll: !o.postgresUrl, address: o.advertiseUrl ?? url });
  // Its connections' rows name this replica's `workers` row, which now exists.
  await agentHub.start();
  await workspaces.start({ accessUrl: o.accessUrl ?? url, takeOverAll: !o.postgresUrl });
  // Which replica owns which chat (chats.worker_id) is only readable with this ID.
  log.info({ workerId: worker.id }, "worker started");
  const accessUrl = o.accessUrl ?? url;

  return {
    url,
    db,
    worker,
    metrics,
    localAgent,
    accessUrl,
    agentHub,
    agents,
    async close(c = {}) {
      // The API's close waits for the agents' upgraded sockets, which the hub closes once the
      // worker stopped waiting on them (their agents then dial another replica).
      const apiClosed = api.close();
      apiClosed.catch(() => undefined); // awaited below
      await workspaces.stop();
      await worker.stop();
      await agentHub.close();
      await apiClosed;
      if (!c.keepLocalAgent) await supervisor?.stop();
      agents.close();
      await db.close();
      // PGlite makes some files (WAL segments) world-readable as it runs: restrict them again.
      if (!o.postgresUrl) restrictModes(o.dataDir);
    },
  };
}

export async function runServer(o: ServerOptions): Promise<void> {
  const log = createLogger({ level: o.logLevel ?? DEFAULT_LOG_LEVEL });
  // The UI's build (in the checkout, not the data dir) keeps the user's umask.
  const webRoot = o.webRoot ?? (await ensureWebBuilt(log));
  // Whatever the server creates from here is its own (0600 files, 0700 dirs); the local agent
  // and the commands it runs get the umask the server was started with, so workspace files are
  // made as the user expects.
  const childUmask = process.umask(0o077);
  const idleGc = startIdleGc();
  const started = startServer({ childUmask, ...o, webRoot, onActivity: idleGc.poke });
  // A stop asked for while the server starts waits for the start, then closes: the default
  // action would kill it mid-initdb, or leave its local agent running without it.
  stopOnSignals(async () => (await started).close());
  const server = await started;
  process.stdout.write(`listening on ${server.url}\n`);
}
