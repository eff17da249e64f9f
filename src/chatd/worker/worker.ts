// The worker (CHATD.md 4): one per replica. It acquires runnable chats with leases, renews
// the leases of all its chats in one statement, and runs one runner per owned chat that
// follows the chat's snapshot. Stopping a wait never stops the work (C4): shutdown, a lost
// lease or a changed snapshot abort the task's waits and send nothing to the agent. The worker
// also keeps this replica's row in the registry (replicas.ts) with the same heartbeat.

import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { realClock, type Clock, type Timer } from "../../contract/index.ts";
import type { Chat, Fence } from "../chats.ts";
import { generationTask, type GenerationDeps } from "../generation.ts";
import { interruptTask } from "../interrupt.ts";
import { createChatdMetrics, silentLogger, type ChatdMetrics } from "../observe.ts";
import {
  abandon,
  acquire,
  CHAT_CHANNEL,
  finishError,
  finishInterruption,
  heartbeat,
  HeldChat,
  loadChat,
  recordRetryState,
  type ChatChange,
} from "../transitions/index.ts";
import { deregisterReplica, registerReplica, sweepReplicas } from "../replicas.ts";
import { failureSentence, failureSummary } from "./failure.ts";
import { ATTEMPT_TIMEOUT_MS, runTaskWithRetry } from "./retry.ts";

export const DEFAULT_LEASE_MS = 300_000;
export const DEFAULT_HEARTBEAT_MS = 30_000;
export const ACQUIRE_INTERVAL_MS = 1_000;
/** How many chats one acquisition round claims at most. */
export const ACQUIRE_LIMIT = 100;
/** A runner whose task ended without changing the chat waits this long before it looks again. */
export const IDLE_RECHECK_MS = 1_000;

export interface WorkerOptions extends Omit<GenerationDeps, "clock" | "log" | "metrics"> {
  clock?: Clock;
  /**
   * Where the worker logs (it binds `replica`, its ID): tool calls, takeovers, interrupts,
   * and the errors it handles (task retries, lost heartbeats). Silent by default.
   */
  log?: Logger;
  /** This replica's metrics; a fresh set of its own by default. */
  metrics?: ChatdMetrics;
  workerId?: string;
  leaseMs?: number;
  heartbeatMs?: number;
  acquireIntervalMs?: number;
  attemptTimeoutMs?: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /**
   * A task whose attempts keep failing gives up this long after its first failure (default
   * RETRY_LIMIT_MS, 10 minutes): a turn ends in `error` with `last_error`, an interruption is
   * committed with `unknown` results.
   */
  retryLimitMs?: number;
  /** ... or after this many failures in a row (default RETRY_MAX_ATTEMPTS). */
  retryMaxAttempts?: number;
  /** The longest Retry-After of a provider that is waited out (default RETRY_AFTER_MAX_MS). */
  retryAfterMaxMs?: number;
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
  #stopped = false;
  /** The internal base URL other replicas reach this one at (null: none, e.g. in-process tests). */
  #address: string | null = null;

  constructor(o: WorkerOptions) {
    this.id = o.workerId ?? randomUUID();
    this.#o = o;
    this.#deps = {
      ...o,
      clock: o.clock ?? realClock,
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
            this.#startRunner(c.chatId, c.runnerId, c.chat);
          }
        } catch (err) {
          this.#error(err, undefined, "acquire");
        }
      } while (this.#acquireAgain && !this.#stopped);
    };
    this.#acquiring = run().finally(() => (this.#acquiring = undefined));
    return this.#acquiring;
  }

  #startRunner(chatId: string, runnerId: string, claimed: Chat): void {
    if (this.#stopped) return;
    this.#runners.get(chatId)?.stop();
    const runner = new Runner(this, this.#deps, this.#o, chatId, runnerId, claimed);
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

/** Follows one owned chat's snapshot and runs the task its status calls for. */
class Runner {
  readonly done: Promise<void>;
  #task: { fence: Fence; ac: AbortController } | undefined;
  #stopped = new AbortController();
  #wake: (() => void) | undefined;
  /** The chat as this runner last read or wrote it: its tasks start from it. */
  readonly #held: HeldChat;
  /** The deps of this runner's tasks: the worker's, and what it holds. */
  readonly #taskDeps: GenerationDeps;

  constructor(
    private readonly worker: Worker,
    private readonly deps: GenerationDeps,
    private readonly o: WorkerOptions,
    readonly chatId: string,
    readonly runnerId: string,
    claimed: Chat,
  ) {
    this.#held = new HeldChat(deps.clock);
    this.#held.read(claimed);
    this.#taskDeps = { ...deps, held: this.#held };
    this.done = this.#loop().catch((err: unknown) =>
      deps.log.warn({ error: failureSummary(err), chat_id: chatId }, "runner failed"),
    );
  }

  stop(): void {
    this.#stopped.abort();
    this.#task?.ac.abort();
    this.#wake?.();
  }

  /** A change of status, history or owner makes the current task stale: stop its waits. */
  onChange(change: ChatChange): void {
    this.#held.changed(change);
    const t = this.#task;
    if (
      t &&
      (change.status !== t.fence.status ||
        change.history_version !== t.fence.historyVersion ||
        change.runner_id !== this.runnerId)
    ) {
      t.ac.abort();
    }
    this.#wake?.();
  }

  /**
   * Ends a task that failed for good or for too long. A turn ends in `error`; an interruption
   * is committed with an honest `unknown` result for every call still without one (it always
   * ends), or, if even that cannot be written, in `error`.
   */
  async #endTask(
    fence: Fence,
    err: unknown,
    why: "permanent" | "gave_up",
    attempts: number,
  ): Promise<void> {
    const error = {
      message: failureSentence(err),
      ...(why === "gave_up" && {
        detail: `Gave up after ${attempts} failed attempt${attempts === 1 ? "" : "s"} in a row.`,
      }),
    };
    this.deps.log.warn(
      { error: failureSummary(err), chat_id: this.chatId, attempts, why },
      fence.status === "interrupting"
        ? "interrupt task failed; the interruption ends with unknown results"
        : "task failed; the turn ends in error",
    );
    if (fence.status === "interrupting") {
      try {
        await finishInterruption(this.deps.db, fence, [], error, this.#held);
        return;
      } catch {
        // fall through: the chat ends in error instead
      }
    }
    await finishError(this.deps.db, fence, error, [], this.#held).catch(() => undefined);
  }

  /** Reads the chat row (what the runner held of it is kept if the chat did not change). */
  async #read() {
    const chat = await loadChat(this.deps.db, this.chatId);
    if (chat) this.#held.read(chat);
    return chat;
  }

  async #loop(): Promise<void> {
    let lastSnapshot: string | undefined;
    while (!this.#stopped.signal.aborted) {
      const chat = this.#held.chat ?? (await this.#read());
      if (!chat || chat.workerId !== this.worker.id || chat.runnerId !== this.runnerId) return;
      if (chat.archived || (chat.status !== "running" && chat.status !== "interrupting")) {
        await abandon(this.deps.db, this.chatId, this.worker.id, this.runnerId);
        return;
      }
      if (chat.snapshotVersion === lastSnapshot) {
        // The last task ended without changing anything: wait for a change, then look again.
        await new Promise<void>((resolve) => {
          const t = this.deps.clock.setTimer(IDLE_RECHECK_MS, resolve);
          this.#wake = () => {
            t.cancel();
            resolve();
          };
        });
        this.#wake = undefined;
      }
      lastSnapshot = chat.snapshotVersion;
      const fence: Fence = {
        chatId: chat.id,
        workerId: this.worker.id,
        runnerId: this.runnerId,
        status: chat.status,
        historyVersion: chat.historyVersion,
      };
      const ac = new AbortController();
      this.#task = { fence, ac };
      const task = chat.status === "running" ? generationTask : interruptTask;
      await runTaskWithRetry((signal) => task(this.#taskDeps, fence, signal), ac.signal, {
        clock: this.deps.clock,
        attemptTimeoutMs: this.o.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
        ...(this.o.backoffMinMs !== undefined && { backoffMinMs: this.o.backoffMinMs }),
        ...(this.o.backoffMaxMs !== undefined && { backoffMaxMs: this.o.backoffMaxMs }),
        ...(this.o.retryLimitMs !== undefined && { retryLimitMs: this.o.retryLimitMs }),
        ...(this.o.retryMaxAttempts !== undefined && { maxAttempts: this.o.retryMaxAttempts }),
        ...(this.o.retryAfterMaxMs !== undefined && { retryAfterMaxMs: this.o.retryAfterMaxMs }),
        onRetry: async (err, attempt, delayMs) => {
          // Never the error itself: a model error carries the prompt, a query error its values.
          this.deps.log.warn(
            { error: failureSummary(err), chat_id: this.chatId, attempt, delay_ms: delayMs },
            "task attempt failed; retrying",
          );
          await recordRetryState(
            this.deps.db,
            fence,
            { attempt, lastError: failureSentence(err), delayMs },
            this.#held,
          ).catch(() => undefined);
        },
        onFailure: (err, why, attempts) => this.#endTask(fence, err, why, attempts),
      });
      this.#task = undefined;
    }
  }
}
