// runTaskWithRetry (CHATD.md 4): a failed attempt is retried with backoff until it succeeds,
// the task is canceled, it exits as expected (a stale fence, a deleted chat), it fails for good
// (a permanent failure), or it has failed for too long: after RETRY_LIMIT_MS of failures in a
// row, or RETRY_MAX_ATTEMPTS of them, or UNREADABLE_ANSWER_MAX_ATTEMPTS model answers in a row
// the SDK could not read, the task gives up, so no input keeps a chat busy forever.
// Each attempt has its own timeout. A provider's Retry-After is waited out (bounded). Retrying
// changes nothing for the agent (C2): the next attempt sends the same requests and the agent
// replays what already ran.

import { sleep, type Clock } from "../../contract/index.ts";
import { FenceError } from "../chats.ts";
import {
  isExpectedExit,
  isPermanent,
  isUnreadableAnswer,
  retryAfterMs,
  RETRY_AFTER_MAX_MS,
  UNREADABLE_ANSWER_MAX_ATTEMPTS,
} from "./failure.ts";

export const RETRY_BACKOFF_MIN_MS = 100;
export const RETRY_BACKOFF_MAX_MS = 5_000;
export const ATTEMPT_TIMEOUT_MS = 15 * 60_000;
/** A task whose attempts keep failing gives up this long after its first failure. */
export const RETRY_LIMIT_MS = 10 * 60_000;
/** ... or at this many failures in a row, whichever comes first (a backstop for tiny backoffs). */
export const RETRY_MAX_ATTEMPTS = 1_000;

export { isExpectedExit, isPermanent };

export interface RetryOptions {
  clock: Clock;
  attemptTimeoutMs: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** Give up this long after the first of a run of failures (default RETRY_LIMIT_MS). */
  retryLimitMs?: number;
  /** Give up at this many failures in a row (default RETRY_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Give up at this many unreadable model answers in a row (UNREADABLE_ANSWER_MAX_ATTEMPTS). */
  maxUnreadableAnswers?: number;
  /** The longest Retry-After honoured (default RETRY_AFTER_MAX_MS). */
  retryAfterMaxMs?: number;
  /** The wall clock a Retry-After date is read against (default Date.now). */
  wallNow?: () => number;
  /** Told about every failed attempt that will be retried, before the wait (for retry_state). */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => Promise<void> | void;
  /**
   * Ends the task with `err`: a failure no retry can fix (`permanent`), or the last of a run of
   * failures that reached the bounds (`gave_up`).
   */
  onFailure?: (err: unknown, why: "permanent" | "gave_up", attempts: number) => Promise<void>;
}

export class AttemptTimeoutError extends Error {
  override readonly name = "AttemptTimeoutError";
  constructor(ms: number) {
    super(`The task attempt ran out of its ${ms} ms.`);
  }
}

/**
 * Why an attempt's signal aborts once the attempt is over: made once, since an abort without a
 * reason builds a DOMException with its stack each time (measurable in bench:load).
 */
export const ATTEMPT_OVER = new DOMException("The attempt is over.", "AbortError");

/**
 * Whether a model attempt that threw `err` was stopped — its task aborted for another reason
 * than its own timeout (an interrupt, a changed snapshot), or its commit lost to the chat moving
 * under it — rather than failed. A stopped attempt's stream episode stays for the interrupt
 * task to bill; a failed or timed-out one bills nothing (CHATD.md 9).
 */
export function attemptStopped(err: unknown, signal: AbortSignal): boolean {
  return (
    (signal.aborted && !(signal.reason instanceof AttemptTimeoutError)) || err instanceof FenceError
  );
}

export async function runTaskWithRetry(
  task: (signal: AbortSignal) => Promise<void>,
  signal: AbortSignal,
  o: RetryOptions,
): Promise<void> {
  let backoff = o.backoffMinMs ?? RETRY_BACKOFF_MIN_MS;
  let firstFailureAt: number | undefined;
  let unreadable = 0;
  for (let attempt = 1; !signal.aborted; attempt++) {
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const timer = o.clock.setTimer(o.attemptTimeoutMs, () =>
      ac.abort(new AttemptTimeoutError(o.attemptTimeoutMs)),
    );
    let delay = backoff;
    try {
      await task(ac.signal);
      return;
    } catch (err) {
      if (signal.aborted || isExpectedExit(err)) return;
      // An attempt we cut off (its timeout) failed because of that, whatever the error says.
      const cutOff = ac.signal.aborted;
      if (isPermanent(err) && !cutOff && o.onFailure) {
        await o.onFailure(err, "permanent", attempt);
        return;
      }
      const now = o.clock.now();
      firstFailureAt ??= now;
      const limitMs = o.retryLimitMs ?? RETRY_LIMIT_MS;
      unreadable = !cutOff && isUnreadableAnswer(err) ? unreadable + 1 : 0;
      if (
        o.onFailure &&
        (now - firstFailureAt >= limitMs ||
          attempt >= (o.maxAttempts ?? RETRY_MAX_ATTEMPTS) ||
          unreadable >= (o.maxUnreadableAnswers ?? UNREADABLE_ANSWER_MAX_ATTEMPTS))
      ) {
        await o.onFailure(err, "gave_up", attempt);
        return;
      }
      const asked = cutOff
        ? undefined
        : retryAfterMs(err, (o.wallNow ?? Date.now)(), o.retryAfterMaxMs ?? RETRY_AFTER_MAX_MS);
      if (asked !== undefined) delay = Math.max(delay, asked);
      await o.onRetry?.(err, attempt, delay);
    } finally {
      timer.cancel();
      signal.removeEventListener("abort", onAbort);
      // Whatever the attempt left waiting (the other calls of a failed batch) stops waiting now;
      // the agent keeps working (C4).
      ac.abort(ATTEMPT_OVER);
    }
    try {
      await sleep(o.clock, delay, signal);
    } catch {
      return;
    }
    backoff = Math.min(backoff * 2, o.backoffMaxMs ?? RETRY_BACKOFF_MAX_MS);
  }
}
