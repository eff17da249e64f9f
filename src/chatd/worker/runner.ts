// A runner (CHATD.md 4): follows one owned chat's snapshot and runs the task its status calls
// for — a generation task while running, an interrupt task while interrupting — from what it
// holds of the chat (transitions/held.ts), retrying failed attempts; it lets go of the chat
// when it is no longer runnable or no longer its own. The worker (worker.ts) starts one per
// chat it acquires.

/** Follows one owned chat's snapshot and runs the task its status calls for. */
import type { Fence } from "../chats.ts";
import { generationTask, type GenerationDeps } from "../generation.ts";
import { interruptTask } from "../interrupt.ts";
import {
  abandon,
  finishError,
  finishInterruption,
  HELD_CHAT_MS,
  HeldChat,
  loadChat,
  recordRetryState,
  type Acquired,
  type ChatChange,
} from "../transitions/index.ts";
import { failureSentence, failureSummary } from "./failure.ts";
import { ATTEMPT_TIMEOUT_MS, runTaskWithRetry } from "./retry.ts";

/** Why a task's signal aborts when the chat changed under it (made once: see ATTEMPT_OVER). */
const STALE_TASK = new DOMException("The chat changed: the task is stale.", "AbortError");

/** A runner whose task ended without changing the chat waits this long before it looks again. */
export const IDLE_RECHECK_MS = 1_000;

/** How a runner retries its tasks (the worker's options of the same names). */
export interface RunnerOptions {
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

export class Runner {
  readonly done: Promise<void>;
  readonly chatId: string;
  readonly runnerId: string;
  #task: { fence: Fence; ac: AbortController } | undefined;
  #stopped = new AbortController();
  #wake: (() => void) | undefined;
  /** The chat as this runner last read or wrote it: its tasks start from it. */
  readonly #held: HeldChat;
  /** The deps of this runner's tasks: the worker's, and what it holds. */
  readonly #taskDeps: GenerationDeps;

  constructor(
    private readonly workerId: string,
    private readonly deps: GenerationDeps,
    private readonly o: RunnerOptions,
    claimed: Acquired,
  ) {
    this.chatId = claimed.chatId;
    this.runnerId = claimed.runnerId;
    this.#held = new HeldChat(deps.clock, HELD_CHAT_MS, deps.feed);
    this.#held.claimed(claimed.chat, claimed.start);
    this.#taskDeps = { ...deps, held: this.#held };
    // A model step sent ahead that no task took is aborted when the runner ends.
    this.done = this.#loop()
      .finally(() => this.#held.dropStepAhead())
      .catch((err: unknown) =>
        deps.log.warn({ error: failureSummary(err), chat_id: this.chatId }, "runner failed"),
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
    // A notification of the runner's own write (or an older one) arrives after the write's
    // answer, maybe while the next task runs: it must not stop that task.
    if (!this.#held.isNews(change)) return;
    const t = this.#task;
    if (
      t &&
      (change.status !== t.fence.status ||
        change.history_version !== t.fence.historyVersion ||
        change.runner_id !== this.runnerId)
    ) {
      t.ac.abort(STALE_TASK);
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
      if (!chat || chat.workerId !== this.workerId || chat.runnerId !== this.runnerId) return;
      if (chat.archived || (chat.status !== "running" && chat.status !== "interrupting")) {
        await abandon(this.deps.db, this.chatId, this.workerId, this.runnerId);
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
        workerId: this.workerId,
        runnerId: this.runnerId,
        status: chat.status,
        historyVersion: chat.historyVersion,
      };
      const ac = new AbortController();
      this.#task = { fence, ac };
      const task = chat.status === "running" ? generationTask : interruptTask;
      if (task === interruptTask) this.#held.dropStepAhead();
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
