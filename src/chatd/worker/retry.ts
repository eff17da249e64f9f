// runTaskWithRetry (CHATD.md 4): a failed attempt is retried with backoff until it
// succeeds, the task is canceled, or it exits as expected (a stale fence, a deleted chat).
// Each attempt has its own timeout. Retrying changes nothing for the agent (C2): the next
// attempt sends the same requests and the agent replays what already ran.

import { APICallError } from "ai";
import { sleep, type Clock } from "../../contract/index.ts";
import { ChatNotFoundError, FenceError } from "../chats.ts";
import { StaleToolCallError } from "../tools/index.ts";

export const RETRY_BACKOFF_MIN_MS = 100;
export const RETRY_BACKOFF_MAX_MS = 5_000;
export const ATTEMPT_TIMEOUT_MS = 15 * 60_000;

export interface RetryOptions {
  clock: Clock;
  attemptTimeoutMs: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** Told about every failed attempt before the wait (for retry_state). */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => Promise<void> | void;
  /** A failure no retry can fix ends the task with it. */
  onPermanentFailure?: (err: unknown) => Promise<void>;
}

/** The task ended in a way that needs no retry and no error report. */
export function isExpectedExit(err: unknown): boolean {
  return (
    err instanceof FenceError ||
    err instanceof ChatNotFoundError ||
    err instanceof StaleToolCallError
  );
}

/** A model answer that a retry cannot change (a bad key, an unknown model, a bad request). */
export function isPermanent(err: unknown): boolean {
  return APICallError.isInstance(err) && !err.isRetryable;
}

export class AttemptTimeoutError extends Error {
  override readonly name = "AttemptTimeoutError";
  constructor(ms: number) {
    super(`The task attempt ran out of its ${ms} ms.`);
  }
}

export async function runTaskWithRetry(
  task: (signal: AbortSignal) => Promise<void>,
  signal: AbortSignal,
  o: RetryOptions,
): Promise<void> {
  let delay = o.backoffMinMs ?? RETRY_BACKOFF_MIN_MS;
  for (let attempt = 1; !signal.aborted; attempt++) {
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const timer = o.clock.setTimer(o.attemptTimeoutMs, () =>
      ac.abort(new AttemptTimeoutError(o.attemptTimeoutMs)),
    );
    try {
      await task(ac.signal);
      return;
    } catch (err) {
      if (signal.aborted || isExpectedExit(err)) return;
      // An attempt we cut off (its timeout) failed because of that, whatever the error says.
      if (isPermanent(err) && !ac.signal.aborted && o.onPermanentFailure) {
        await o.onPermanentFailure(err);
        return;
      }
      await o.onRetry?.(err, attempt, delay);
    } finally {
      timer.cancel();
      signal.removeEventListener("abort", onAbort);
    }
    try {
      await sleep(o.clock, delay, signal);
    } catch {
      return;
    }
    delay = Math.min(delay * 2, o.backoffMaxMs ?? RETRY_BACKOFF_MAX_MS);
  }
}
