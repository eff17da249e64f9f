// Login throttling: failures counted per key in the database, so every replica sees the same
// failures and a burst of concurrent guesses is let through only up to the limit.

import type { Database } from "../chatd/db/index.ts";

export interface ThrottleOptions {
  /** Failures allowed (per email and per client address) before logins wait. */
  maxFailures: number;
  /** The first wait; each further failure doubles it, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * The clock (tests move it). Its milliseconds are stored and read by every replica, so in a
   * server it is wall-clock time: replicas' clocks must agree to well within `baseDelayMs`.
   */
  now(): number;
}

export const DEFAULT_THROTTLE: ThrottleOptions = {
  maxFailures: 5,
  baseDelayMs: 1_000,
  maxDelayMs: 15 * 60_000,
  now: () => Date.now(),
};

/**
 * Login failures per key (`email:…`, `ip:…`), in the database (table login_failures) so every
 * replica counts the same failures: after `maxFailures` failures a key waits a delay that
 * doubles with each further failure; a success clears its keys. An attempt is counted as a
 * failure before its password is checked (and uncounted by the success), in one transaction
 * that locks the keys' rows: a burst of concurrent guesses is counted one by one, not let
 * through together while the first ones are still hashing. A key idle for the longest delay
 * starts again from one failure, and its row is deleted by a later attempt of any key, so the
 * table holds at most the keys that failed within the longest delay.
 */
export class LoginThrottle {
  constructor(
    private readonly db: Database,
    private readonly o: ThrottleOptions = DEFAULT_THROTTLE,
  ) {}

  private delayMs(count: number): number {
    if (count < this.o.maxFailures) return 0;
    return Math.min(this.o.baseDelayMs * 2 ** (count - this.o.maxFailures), this.o.maxDelayMs);
  }

  /**
   * Milliseconds until any of the keys may try again; 0 when they may now, and then this
   * attempt is already counted as a failure until {@link succeed}.
   */
  async attempt(keys: string[]): Promise<number> {
    const now = this.o.now();
    // Sorted: concurrent attempts lock and insert shared keys in one order (no deadlock).
    const unique = [...new Set(keys)].sort();
    return this.db.transaction(async (tx) => {
      // Every key gets a row (count 0 when new) that this attempt then locks, so concurrent
      // attempts on a key, new or not, take turns and each sees the others' counts.
      await tx.query(
        `INSERT INTO login_failures (key, count, last_at_ms)
         SELECT k, 0, $2::bigint FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING`,
        [unique, now],
      );
      const r = await tx.query<{ count: number; last_at_ms: string }>(
        `SELECT count, last_at_ms FROM login_failures WHERE key = ANY($1::text[])
         ORDER BY key FOR UPDATE`,
        [unique],
      );
      let wait = 0;
      for (const f of r.rows) {
        // A key idle for the longest delay starts again from nothing.
        if (Number(f.last_at_ms) < now - this.o.maxDelayMs) continue;
        wait = Math.max(wait, Number(f.last_at_ms) + this.delayMs(f.count) - now);
      }
      if (wait > 0) return wait;
      await tx.query(
        `UPDATE login_failures SET
           count = CASE WHEN last_at_ms < $2::bigint - $3::bigint THEN 1 ELSE count + 1 END,
           last_at_ms = $2::bigint
         WHERE key = ANY($1::text[])`,
        [unique, now, this.o.maxDelayMs],
      );
      // Bounded growth under a spray of emails. The index on last_at_ms makes this find only
      // the rows that expired since the last attempt, so it stays cheap to run on every one.
      await tx.query("DELETE FROM login_failures WHERE last_at_ms < $1::bigint - $2::bigint", [
        now,
        this.o.maxDelayMs,
      ]);
      return 0;
    });
  }

  async succeed(keys: string[]): Promise<void> {
    await this.db.query("DELETE FROM login_failures WHERE key = ANY($1::text[])", [keys]);
  }
}
