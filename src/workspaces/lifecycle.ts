// The lifecycle loop: stops idle workspaces. It runs on one replica at a time — the holder of
// the lifecycle lease, renewed each round and taken over once it is older than a lease — so
// two replicas never judge one workspace at once. A running workspace past its deadline is
// asked for its processes first (a background command is activity too); only then, under the
// workspace's row lock and with its activity read again, is a stop queued (reason autostop).
// A chat that runs on it, or a turn that began since, keeps it running.

import type { Logger } from "pino";
import type { AgentPool } from "../chatd/agents.ts";
import type { Database, Queryable } from "../chatd/db/index.ts";
import { realClock, type Clock, type Timer } from "../contract/index.ts";
import { BuildInProgressError, queueBuild } from "./builds.ts";
import { runningWorkspaces, touchWorkspaces, workspaceState } from "./workspace.ts";

/** Idle workspaces are looked for this often. */
export const LIFECYCLE_INTERVAL_MS = 10_000;
/** Bound on asking an agent for its processes. */
export const PROCESS_LIST_TIMEOUT_MS = 5_000;

export interface LifecycleOptions {
  db: Database;
  workerId: string;
  /** The lease of the loop: a silent holder is replaced after this long. */
  leaseMs: number;
  intervalMs?: number;
  agents: AgentPool;
  log: Logger;
  clock?: Clock;
}

/** Takes or renews the lifecycle lease; true when `workerId` holds it now. */
export async function holdLifecycleLease(
  q: Queryable,
  workerId: string,
  leaseMs: number,
): Promise<boolean> {
  const r = await q.query<{ worker_id: string }>(
    `INSERT INTO workspace_lifecycle_lease (singleton, worker_id, heartbeat_at) VALUES (true, $1, now())
     ON CONFLICT (singleton) DO UPDATE SET worker_id = EXCLUDED.worker_id, heartbeat_at = now()
     WHERE workspace_lifecycle_lease.worker_id = EXCLUDED.worker_id
        OR workspace_lifecycle_lease.heartbeat_at < now() - make_interval(secs => $2::float8 / 1000)
     RETURNING worker_id`,
    [workerId, leaseMs],
  );
  return r.rows.length > 0;
}

export async function releaseLifecycleLease(q: Queryable, workerId: string): Promise<void> {
  await q.query("DELETE FROM workspace_lifecycle_lease WHERE worker_id = $1", [workerId]);
}

/** What the round did with a workspace past its deadline. */
export type IdleDecision =
  | { status: "stopped"; buildId: string }
  | { status: "kept"; why: "processes" | "active" | "agent_unanswered" };

export class Lifecycle {
  readonly #o: LifecycleOptions;
  readonly #clock: Clock;
  #timer: Timer | undefined;
  #round: Promise<void> | undefined;
  #stopped = false;

  constructor(o: LifecycleOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
  }

  start(): void {
    const schedule = () => {
      this.#timer = this.#clock.setTimer(this.#o.intervalMs ?? LIFECYCLE_INTERVAL_MS, () => {
        if (this.#stopped) return;
        this.#round = this.round().then(
          () => undefined,
          () => undefined,
        );
        void this.#round.finally(() => {
          this.#round = undefined;
          schedule();
        });
      });
    };
    schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    await this.#round;
    await releaseLifecycleLease(this.#o.db, this.#o.workerId).catch(() => undefined);
  }

  /** One round: if this replica holds the lease, stop every workspace idle past its deadline. */
  async round(): Promise<IdleDecision[]> {
    const { db, log } = this.#o;
    const decisions: IdleDecision[] = [];
    try {
      if (!(await holdLifecycleLease(db, this.#o.workerId, this.#o.leaseMs))) return decisions;
      for (const w of await runningWorkspaces(db)) {
        if (this.#stopped) break;
        if (!w.deadline || w.deadline > w.now) continue;
        const d = await this.#judge(w.id, w.connected);
        decisions.push(d);
        if (d.status === "stopped")
          log.info({ workspace_id: w.id, build_id: d.buildId }, "idle workspace stopped");
      }
    } catch (err) {
      log.warn({ err }, "lifecycle round failed");
    }
    return decisions;
  }

  async #judge(workspaceId: string, connected: boolean): Promise<IdleDecision> {
    if (connected) {
      const running = await this.#processesRunning(workspaceId);
      if (running === undefined) return { status: "kept", why: "agent_unanswered" };
      if (running) {
        await touchWorkspaces(this.#o.db, [workspaceId]);
        return { status: "kept", why: "processes" };
      }
    }
    return this.#o.db.transaction(async (tx) => {
      await tx.query("SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE", [workspaceId]);
      // Read again under the lock: a turn that began or a stream opened meanwhile counts.
      const w = await workspaceState(tx, workspaceId);
      if (!w || w.status !== "running" || !w.deadline || w.deadline > w.now)
        return { status: "kept", why: "active" } as const;
      try {
        const b = await queueBuild(tx, {
          workspaceId,
          transition: "stop",
          reason: "autostop",
          createdBy: null,
        });
        return { status: "stopped", buildId: b.id } as const;
      } catch (err) {
        if (err instanceof BuildInProgressError) return { status: "kept", why: "active" } as const;
        throw err;
      }
    });
  }

  /** Whether the workspace's agent runs a process; undefined when it did not answer. */
  async #processesRunning(workspaceId: string): Promise<boolean | undefined> {
    try {
      const client = await this.#o.agents.forWorkspace(workspaceId);
      if (!client) return undefined;
      const bound = { timeoutMs: PROCESS_LIST_TIMEOUT_MS };
      // Lists are per chat; the info's count covers every chat. An agent without the count
      // (an older one) still lists every process to a request without a chat.
      const { processes_running } = await client.info(bound);
      if (typeof processes_running === "number") return processes_running > 0;
      const r = await client.listProcesses({}, bound);
      return r.processes.some((p) => p.running);
    } catch (err) {
      this.#o.log.warn({ err, workspace_id: workspaceId }, "process list for idle check failed");
      return undefined;
    }
  }
}
