// The injected clock. Everything that decides by time reads it from here, so tests can
// drive time; only durations ever cross a process boundary, never these instants.

/** A cancelable timer handle. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on this clock's own scale (monotonic for the real clock). */
  now(): number;
  /** Calls `fn` once, `ms` from now on this clock. */
  setTimer(ms: number, fn: () => void): Timer;
}

/** The real clock: `performance.timeOrigin + performance.now()`, monotonic, in ms. */
export const realClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(t) };
  },
};

/**
 * Resolves after `ms` on `clock`, or rejects with the signal's reason when it aborts first.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason as Error);
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A clock that only moves when told to. Timers fire in due order during `advance`.
 */
export class ManualClock implements Clock {
  #now: number;
  #timers: { due: number; seq: number; fn: () => void }[] = [];
  #seq = 0;

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const entry = { due: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(entry);
    return {
      cancel: () => {
        this.#timers = this.#timers.filter((t) => t !== entry);
      },
    };
  }

  /** Whether a timer falls due at `at` (a test's way to know a wait has begun). */
  hasTimerAt(at: number): boolean {
    return this.#timers.some((t) => t.due === at);
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const next = this.#timers
        .filter((t) => t.due <= target)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = next.due;
      next.fn();
    }
    this.#now = target;
  }
}
