// The worker (CHATD.md 4): one per replica. It acquires runnable chats with leases, renews
// the leases of all its chats in one statement, and runs one runner per owned chat that
// follows the chat's snapshot. Stopping a wait never stops the work (C4): shutdown, a lost
// lease or a changed snapshot abort the task's waits and send nothing to the agent. The worker
// also keeps this replica's row in the registry (replicas.ts) with the same heartbeat.

import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { realClock, type AgentClient, type Clock, type Timer } from "../../contract/index.ts";
import type { GenerationDeps } from "../generation.ts";
import { captureTimeoutMs, ContextPrefetch, contextBudget } from "../prompt/index.ts";
import { RecentSnapshots, sendAhead, type StepAhead } from "../step-ahead.ts";
import { createChatdMetrics, silentLogger, type ChatdMetrics } from "../observe.ts";
import {
  abandon,
  acquire,
  CHAT_CHANNEL,
  claimIn,
  heartbeat,
  type Acquired,
  type ChatChange,
  type LocalClaim,
  userMessage,
} from "../transitions/index.ts";
import { deregisterReplica, registerReplica, sweepReplicas } from "../replicas.ts";
import { failureSummary } from "./failure.ts";
import { Runner, type RunnerOptions } from "./runner.ts";

export const DEFAULT_LEASE_MS = 300_000;
export const DEFAULT_HEARTBEAT_MS = 30_000;
export const ACQUIRE_INTERVAL_MS = 1_000;
/** How many chats one acquisition round claims at most. */
export const ACQUIRE_LIMIT = 100;
export interface WorkerOptions
  extends Omit<GenerationDeps, "clock" | "log" | "metrics">, RunnerOptions {
  clock?: Clock;
  /**
   * Where the worker logs (it binds `replica`, its ID): tool calls, takeovers, interrupts,
   * and the errors it handles (task retries, lost heartbeats). Silent by default.
   */
  log?: Logger;
  /** This replica's metrics; a fresh set of its own by default. */
  metrics?: ChatdMetrics;
  workerId?: string;
  /**
   * The agent of workspace `workspaceId` if `userId` may use it as far as this replica knows
   * (AgentPool.forUser): a chat created here asks it for its context while the create statement
   * runs (localClaim). Absent: the first model step asks on its own.
   */
  agentForUser?: (workspaceId: string, userId: string) => Promise<AgentClient | undefined>;
  leaseMs?: number;
  heartbeatMs?: number;
  acquireIntervalMs?: number;
}

/** A chat about to be created by this replica's API (localClaim). */
export interface NewChat {
  ownerId: string;
  workspaceId: string | null;
  modelConfigId: string | null;
  /** Its first message, when it has one (its turn starts). */
  message?: string;
}

export class Worker {
  readonly id: string;
  readonly #o: WorkerOptions;
  readonly #deps: GenerationDeps;
  readonly #runners = new Map<string, Runner>();
  #timers: Timer[] = [];
  #unlisten: (() => Promise<void>) | undefined;
  #acquiring: Promise<void> | undefined;
  #beating: Promise<void> | undefined;
  #acquireAgain = false;
  #started = false;
  #stopped = false;
  /** The internal base URL other replicas reach this one at (null: none, e.g. in-process tests). */
  #address: string | null = null;

  constructor(o: WorkerOptions) {
    this.id = o.workerId ?? randomUUID();
    this.#o = o;
    const clock = o.clock ?? realClock;
    this.#deps = {
      ...o,
      snapshots: o.snapshots ?? new RecentSnapshots(clock),
      clock,
      log: (o.log ?? silentLogger()).child({ replica: this.id }),
      metrics: o.metrics ?? createChatdMetrics(o.db),
    };
  }

  get clock(): Clock {
    return this.#deps.clock;
  }

  /** This worker's log, `replica` bound. */
  get log(): Logger {
    return this.#deps.log;
  }

  /** Chats this worker runs now. */
  get ownedChats(): string[] {
    return [...this.#runners.keys()];
  }

  /**
   * Starts acquiring. `takeOverAll` claims every runnable chat at once, leases or not: for
   * the only replica of an embedded database, whose previous process is gone. `address` is
   * registered as where other replicas reach this one.
   */
  async start(o: { takeOverAll?: boolean; address?: string } = {}): Promise<void> {
    this.#address = o.address ?? null;
    await registerReplica(this.#deps.db, this.id, this.#address);
    this.#unlisten = await this.#deps.db.listen(CHAT_CHANNEL, (payload) => this.#onChange(payload));
    await this.#acquire(o.takeOverAll ?? false);
    this.#started = true;
    this.#every(this.#o.acquireIntervalMs ?? ACQUIRE_INTERVAL_MS, () => this.#kickAcquire());
    this.#every(this.#o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS, () => {
      this.#beating ??= this.#heartbeat().finally(() => (this.#beating = undefined));
    });
  }

  /**
   * Graceful stop: stop acquiring, stop waiting (never cancel agent work), release leases (each
   * release notifies, so another replica acquires at once), deregister.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) t.cancel();
    this.#timers = [];
    await this.#unlisten?.();
    await this.#acquiring;
    await this.#beating; // so no renewal re-registers this replica after it deregisters
    const runners = [...this.#runners.values()];
    for (const r of runners) r.stop();
    await Promise.all(runners.map((r) => r.done));
    await Promise.all(
      runners.map((r) =>
        abandon(this.#deps.db, r.chatId, this.id, r.runnerId).catch((err: unknown) =>
          this.#error(err, r.chatId, "release"),
        ),
      ),
    );
    await deregisterReplica(this.#deps.db, this.id).catch((err: unknown) =>
      this.#error(err, undefined, "deregister"),
    );
  }

  /**
   * A claim for one transition of this replica's API that may start a turn (core.ts
   * LocalClaim): the chat runs here, claimed in that transition's transaction. Undefined
   * before the worker started and once it stops: the transition then notifies, and whichever
   * replica acquires first runs the chat. For a chat about to be created (`newChat`), its
   * agent is asked for its context at once, so the first model step does not wait for the
   * create and then for the agent (prompt/context.ts ContextPrefetch).
   */
  localClaim(newChat?: NewChat): LocalClaim | undefined {
    if (!this.#started || this.#stopped) return undefined;
    let claimed: Acquired | undefined;
    const ask = this.#o.agentForUser;
    const workspaceId = newChat?.workspaceId;
    const agent = workspaceId && ask ? ask(workspaceId, newChat.ownerId) : undefined;
    const prefetch = agent
      ? new ContextPrefetch(agent, captureTimeoutMs(this.#deps.agentAnswerTimeoutMs))
      : undefined;
    // The first model step goes out with the snapshot the workspace gave last (step-ahead.ts)
    // if it is ready by the commit; one that comes later is dropped, and one whose create
    // fails expires unused.
    let ahead: StepAhead | undefined;
    let over = false;
    if (agent && workspaceId && newChat.message !== undefined)
      void this.#firstStepAhead({ ...newChat, workspaceId, message: newChat.message }, agent).then(
        (a) => (over ? a?.drop() : (ahead = a)),
      );
    const drop = (): void => {
      prefetch?.drop();
      ahead?.drop();
    };
    return {
      workerId: this.id,
      claim: async (tx, chatId) => {
        claimed = await claimIn(tx, this.id, chatId);
        return claimed?.chat;
      },
      created: (acquired) => {
        claimed = prefetch ? { ...acquired, start: { ...acquired.start, prefetch } } : acquired;
      },
      committed: () => {
        over = true;
        if (!claimed) return drop();
        const c = claimed;
        claimed = undefined;
        if (!this.#stopped)
          return this.#startRunner(ahead ? { ...c, start: { ...c.start, ahead } } : c);
        drop();
        // Stopped since: the lease goes back at once, as a stop releases the others.
        abandon(this.#deps.db, c.chatId, this.id, c.runnerId).catch((err: unknown) =>
          this.#error(err, c.chatId, "release"),
        );
      },
    };
  }

  /**
   * A new chat's first model step, sent now with the context snapshot its workspace gave the
   * chat's model last on this replica, when its agent is the owner's to use (`agent`, as for the
   * prefetch); taken only if the snapshot the agent gives now makes the same request.
   */
  async #firstStepAhead(
    chat: NewChat & { workspaceId: string; message: string },
    agent: Promise<AgentClient | undefined>,
  ): Promise<StepAhead | undefined> {
    const snapshots = this.#deps.snapshots;
    if (!snapshots) return undefined;
    try {
      if (!(await agent)) return undefined;
      const resolved = await this.#deps.resolveModel({ modelConfigId: chat.modelConfigId });
      // As the create checks it: a model the chat names must be enabled.
      if (chat.modelConfigId !== null && resolved.enabled !== true) return undefined;
      const snapshot = snapshots.recall(resolved.model, chat.workspaceId);
      if (!snapshot) return undefined;
      return sendAhead(
        resolved.model,
        contextBudget(resolved),
        snapshot,
        [],
        [userMessage(chat.message, chat.ownerId)],
        { compactRequested: false, clock: this.#deps.clock },
      );
    } catch {
      return undefined; // the first task resolves them again, and reports what fails
    }
  }

  #every(ms: number, fn: () => void): void {
    const schedule = () => {
      const t = this.#deps.clock.setTimer(ms, () => {
        this.#timers = this.#timers.filter((x) => x !== t);
        if (this.#stopped) return;
        fn();
        schedule();
      });
      this.#timers.push(t);
    };
    schedule();
  }

  #error(err: unknown, chatId: string | undefined, what: string): void {
    this.#deps.log.warn(
      { error: failureSummary(err), ...(chatId && { chat_id: chatId }) },
      `${what} failed`,
    );
  }

  #onChange(payload: string): void {
    let change: ChatChange;
    try {
      change = JSON.parse(payload) as ChatChange;
    } catch {
      return;
    }
    const runner = this.#runners.get(change.chat_id);
    if (runner) runner.onChange(change);
    // Only a runnable chat nobody runs can be claimed now. A chat another runner owns is
    // claimable only once its lease runs out, which the periodic round finds; kicking a round
    // for each of its changes would make every replica acquire nonstop under load.
    else if (
      (change.status === "running" || change.status === "interrupting") &&
      change.runner_id === null
    ) {
      this.#kickAcquire();
    }
  }

  /** Runs an acquisition round now, or once more after the one in progress. */
  #kickAcquire(): void {
    if (this.#stopped) return;
    if (this.#acquiring) {
      this.#acquireAgain = true;
      return;
    }
    void this.#acquire(false);
  }

  async #acquire(takeOverAll: boolean): Promise<void> {
    const run = async () => {
      do {
        this.#acquireAgain = false;
        try {
          const claimed = await acquire(this.#deps.db, this.id, {
            leaseMs: this.#o.leaseMs ?? DEFAULT_LEASE_MS,
            limit: ACQUIRE_LIMIT,
            ignoreLeases: takeOverAll,
          });
          for (const c of claimed) {
            if (c.previousWorkerId !== null) {
              this.#deps.metrics.leaseTakeovers.inc();
              this.#deps.log.info(
                { chat_id: c.chatId, previous_replica: c.previousWorkerId },
                "took over chat",
              );
            }
            this.#startRunner(c);
          }
        } catch (err) {
          this.#error(err, undefined, "acquire");
        }
      } while (this.#acquireAgain && !this.#stopped);
    };
    this.#acquiring = run().finally(() => (this.#acquiring = undefined));
    return this.#acquiring;
  }

  #startRunner(claimed: Acquired): void {
    if (this.#stopped) return;
    const { chatId } = claimed;
    this.#runners.get(chatId)?.stop();
    const runner = new Runner(this.id, this.#deps, this.#o, claimed);
    this.#runners.set(chatId, runner);
    this.#deps.metrics.chatsOwned.set(this.#runners.size);
    void runner.done.then(() => {
      if (this.#runners.get(chatId) === runner) this.#runners.delete(chatId);
      this.#deps.metrics.chatsOwned.set(this.#runners.size);
    });
  }

  async #heartbeat(): Promise<void> {
    try {
      // Only the runners alive when the statement starts: a chat acquired while it runs is
      // missing from its snapshot, and its new runner must not be taken for one that lost it.
      const live = new Map(this.#runners);
      const owned = await heartbeat(
        this.#deps.db,
        this.id,
        [...live.values()].map((r) => r.runnerId),
      );
      for (const [chatId, r] of live) {
        if (!owned.has(chatId) && this.#runners.get(chatId) === r) r.stop();
      }
    } catch (err) {
      this.#error(err, undefined, "heartbeat");
    }
    try {
      await registerReplica(this.#deps.db, this.id, this.#address);
      // A replica silent for a lease is dead: its chats are being taken over, its row goes.
      await sweepReplicas(this.#deps.db, this.#o.leaseMs ?? DEFAULT_LEASE_MS);
    } catch (err) {
      this.#error(err, undefined, "replica heartbeat");
    }
  }
}
