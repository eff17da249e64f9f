// Workspaces the server makes from templates: the public surface, and the services a replica
// runs for them — the builder (claims and runs builds), the lifecycle loop (stops idle
// workspaces, on the replica holding its lease), the activity of open chat streams, and the
// wait a chat's turn makes for its workspace before a model step.

import path from "node:path";
import type { Logger } from "pino";
import type { AgentPool } from "../chatd/agents.ts";
import type { Chat, Fence } from "../chatd/chats.ts";
import type { Database } from "../chatd/db/index.ts";
import type { SecretBox } from "../chatd/secrets/index.ts";
import type { ChatMessage } from "../chatd/messages.ts";
import { realClock, type Clock } from "../contract/index.ts";
import { WorkspaceActivity } from "./activity.ts";
import { Builder } from "./builder.ts";
import { Lifecycle } from "./lifecycle.ts";
import { awaitWorkspace, type ReadinessOptions } from "./readiness.ts";

export * from "./builds.ts";
export * from "./templates.ts";
export * from "./workspace.ts";
export { WorkspaceActivity, ACTIVITY_FLUSH_MS } from "./activity.ts";
export { Builder, BUILD_POLL_MS } from "./builder.ts";
export { Lifecycle, LIFECYCLE_INTERVAL_MS, type IdleDecision } from "./lifecycle.ts";
export { awaitWorkspace, AGENT_WARM_UP_MS } from "./readiness.ts";
export { runningTime, runsBetween, type RunBucket } from "./runs.ts";
export { childEnv } from "./child-env.ts";

/** This checkout's `bin/tether`, which templates run the agent with (tether_bin). */
export const TETHER_BIN = path.resolve(import.meta.dirname, "../../bin/tether");

export interface WorkspaceServicesOptions {
  db: Database;
  /** The server's box: Terraform state is sealed with it at rest. */
  secrets: SecretBox;
  /** This replica's worker ID (it holds the builds and the lifecycle lease it takes). */
  workerId: string;
  agents: AgentPool;
  log: Logger;
  /** Where Terraform's plugin cache lives: `<dir>/terraform-plugins`. */
  dataDir: string;
  leaseMs: number;
  heartbeatMs: number;
  /** How often idle workspaces are looked for and open streams' activity written. */
  lifecycleIntervalMs?: number;
  /** How often open streams' activity is written (default: the lifecycle interval, at most 10 s). */
  activityFlushMs?: number;
  clock?: Clock;
  terraformBin?: string;
  /** tether_bin; this checkout's by default. */
  tetherBin?: string;
  /** Options of the turn's wait (tests shorten them). */
  readiness?: Partial<Omit<ReadinessOptions, "db" | "agents" | "clock">>;
}

export class WorkspaceServices {
  readonly activity: WorkspaceActivity;
  readonly #o: WorkspaceServicesOptions;
  readonly #clock: Clock;
  #builder: Builder | undefined;
  #lifecycle: Lifecycle | undefined;

  constructor(o: WorkspaceServicesOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.activity = new WorkspaceActivity(o.db, {
      clock: this.#clock,
      log: o.log,
      flushMs: o.activityFlushMs ?? Math.min(o.lifecycleIntervalMs ?? 10_000, 10_000),
    });
  }

  /** Workspaces seen without a template: never read again to wait for them or follow them. */
  readonly registered = new Set<string>();

  /** The generation task's wait before a model step (GenerationDeps.workspaceReady). */
  readonly workspaceReady = (
    chat: Chat,
    history: ChatMessage[],
    fence: Fence,
    signal: AbortSignal,
  ): Promise<boolean> =>
    awaitWorkspace(
      {
        db: this.#o.db,
        agents: this.#o.agents,
        clock: this.#clock,
        registered: this.registered,
        ...this.#o.readiness,
      },
      chat,
      history,
      fence,
      signal,
    );

  get builder(): Builder | undefined {
    return this.#builder;
  }

  get lifecycle(): Lifecycle | undefined {
    return this.#lifecycle;
  }

  /**
   * Starts the builder and the lifecycle loop. `accessUrl` is what agents dial; `takeOverAll`
   * (the only replica of an embedded database) ends the previous process's builds at once.
   */
  async start(o: { accessUrl: string; takeOverAll?: boolean }): Promise<void> {
    const { db, workerId, log } = this.#o;
    this.#builder = new Builder({
      db,
      secrets: this.#o.secrets,
      workerId,
      accessUrl: o.accessUrl,
      tetherBin: this.#o.tetherBin ?? TETHER_BIN,
      pluginCacheDir: path.resolve(this.#o.dataDir, "terraform-plugins"),
      ...(this.#o.terraformBin !== undefined && { terraformBin: this.#o.terraformBin }),
      leaseMs: this.#o.leaseMs,
      heartbeatMs: this.#o.heartbeatMs,
      clock: this.#clock,
      log: log.child({ component: "builder" }),
    });
    await this.#builder.start({ takeOverAll: o.takeOverAll ?? false });
    this.#lifecycle = new Lifecycle({
      db,
      workerId,
      leaseMs: this.#o.leaseMs,
      ...(this.#o.lifecycleIntervalMs !== undefined && {
        intervalMs: this.#o.lifecycleIntervalMs,
      }),
      agents: this.#o.agents,
      clock: this.#clock,
      log: log.child({ component: "lifecycle" }),
    });
    this.#lifecycle.start();
  }

  /** Stops the loops; running builds are interrupted and end failed with their state saved. */
  async stop(): Promise<void> {
    this.activity.stop();
    await this.#lifecycle?.stop();
    await this.#builder?.stop();
  }
}
