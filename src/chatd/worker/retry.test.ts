import { describe, expect, it } from "vitest";
import { ManualClock } from "../../contract/index.ts";
import { InvalidResponseDataError } from "ai";
import { runTaskWithRetry } from "./retry.ts";

/** Lets the retry loop run its promise callbacks between clock moves. */
const tick = () => new Promise((r) => setImmediate(r));

describe("runTaskWithRetry bounds", () => {
  it("model answers the SDK cannot read give up after 3 in a row, not after the time limit", async () => {
    const clock = new ManualClock();
    const errors = [
      new Error("a network blip"),
      new InvalidResponseDataError({
        data: {},
        message: "Expected 'function.name' to be a string.",
      }),
      new Error("another blip"),
      ...Array.from(
        { length: 10 },
        () =>
          new InvalidResponseDataError({
            data: {},
            message: "Expected 'function.name' to be a string.",
          }),
      ),
    ];
    let n = 0;
    let ended: { why: string; attempts: number; message: string } | undefined;
    const done = runTaskWithRetry(
      () => Promise.reject(errors[n++]!),
      new AbortController().signal,
      {
        clock,
        attemptTimeoutMs: 60_000,
        backoffMinMs: 100,
        backoffMaxMs: 100,
        onFailure: async (err, why, attempts) => {
          ended = { why, attempts, message: (err as Error).message };
        },
      },
    );
    for (let i = 0; i < 100 && !ended; i++) {
      await tick();
      clock.advance(100);
    }
    await done;
    // A blip between two resets the count: attempts 4, 5 and 6 are the three in a row.
    expect(ended).toEqual({
      why: "gave_up",
      attempts: 6,
      message: "Expected 'function.name' to be a string.",
    });
  });

  it("a task that fails on every attempt gives up once its failures span the limit", async () => {
    const clock = new ManualClock();
    const retries: number[] = [];
    let ended: { why: string; attempts: number } | undefined;
    const done = runTaskWithRetry(
      () => Promise.reject(new Error("always")),
      new AbortController().signal,
      {
        clock,
        attemptTimeoutMs: 60_000,
        backoffMinMs: 100,
        backoffMaxMs: 1_000,
        retryLimitMs: 3_000,
        onRetry: (_err, attempt) => void retries.push(attempt),
        onFailure: async (_err, why, attempts) => {
          ended = { why, attempts };
        },
      },
    );
    for (let i = 0; i < 50 && !ended; i++) {
      await tick();
      clock.advance(100);
    }
    await done;
    // Failures at 0, 0.1, 0.3, 0.7, 1.5, 2.5 (retried), then 3.5 s: past the 3 s limit.
    expect(ended).toEqual({ why: "gave_up", attempts: 7 });
    expect(retries).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("a task gives up at the attempt bound even within the time limit", async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const done = runTaskWithRetry(
      () => Promise.reject(new Error("always")),
      new AbortController().signal,
      {
        clock,
        attemptTimeoutMs: 60_000,
        backoffMinMs: 1,
        backoffMaxMs: 1,
        maxAttempts: 3,
        onFailure: async (_err, _why, n) => {
          attempts = n;
        },
      },
    );
    for (let i = 0; i < 20 && attempts === 0; i++) {
      await tick();
      clock.advance(1);
    }
    await done;
    expect(attempts).toBe(3);
  });

  it("a success after failures ends the task without giving up", async () => {
    const clock = new ManualClock();
    let calls = 0;
    let gaveUp = false;
    const done = runTaskWithRetry(
      async () => {
        if (++calls < 3) throw new Error("not yet");
      },
      new AbortController().signal,
      {
        clock,
        attemptTimeoutMs: 60_000,
        backoffMinMs: 10,
        retryLimitMs: 1_000,
        onFailure: async () => {
          gaveUp = true;
        },
      },
    );
    for (let i = 0; i < 20 && calls < 3; i++) {
      await tick();
      clock.advance(10);
    }
    await done;
    expect(calls).toBe(3);
    expect(gaveUp).toBe(false);
  });
});
