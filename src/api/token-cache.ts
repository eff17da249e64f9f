// The bearer check's token lookups, held briefly by each replica (docs/benchmarks.md), under the
// rule of the config cache (src/chatd/config-cache.ts; read-behind.ts): a change of a token or of
// its user that the check reads — a revoked token, a logout, a disabled user, a role change, a
// deletion — notifies every replica (triggers, migration 052, channel `tether_config`) and each
// drops every token it holds. Held lookups are served only while this replica's listening
// connection is up: until it first listens, and from a drop until it is back (dropping what it held
// then), every request reads. A lookup is also read again once TOKEN_CACHE_MS old, so a
// notification lost without the connection noticing goes unseen that long at most; one in use is
// read again behind the one served once half that old, so a busy client's requests never wait for
// it. Unknown tokens are never held.
// The caller checks expiry and the session idle rule against the clock on every use, and reads
// again before it refuses a held token (auth.ts).

import { realClock, type Clock } from "../contract/index.ts";
import { CONFIG_CHANNEL } from "../chatd/config-cache.ts";
import { readBehind, type HeldEntry } from "../chatd/read-behind.ts";
import type { Database } from "../chatd/db/index.ts";

/** How long a held lookup is used before it is read again even without a notification. */
export const TOKEN_CACHE_MS = 5_000;
/** At most this many tokens are held; past it, all are dropped (a flood of distinct tokens). */
export const TOKEN_CACHE_MAX = 10_000;
/** After a failed LISTEN, the next attempt waits this long (requests read meanwhile). */
const LISTEN_RETRY_MS = 1_000;

/** The tables whose change drops every held token (the triggers' payload is the table name). */
const TABLES = new Set(["api_tokens", "users"]);

type Entry<T> = HeldEntry<T | undefined>;

export class TokenCache<T extends object> {
  #entries = new Map<string, Entry<T>>();
  #listening = false;
  #started = false;
  #failedAt: number | undefined;
  #unlisten: Promise<(() => Promise<void>) | undefined> | undefined;
  #closed = false;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock = realClock,
    private readonly maxAgeMs = TOKEN_CACHE_MS,
  ) {}

  /** Whether held lookups may be served now (the listening connection is up). */
  get serving(): boolean {
    return this.#listening;
  }

  /**
   * `load()`'s answer for the token hash `key` (undefined: no such token), as held when read
   * recently and the cache is serving; `held` says which. A missing token or failed load is not
   * held.
   */
  async read(
    key: string,
    load: () => Promise<T | undefined>,
  ): Promise<{ value: T | undefined; held: boolean }> {
    this.#listen();
    if (!this.#listening) return { value: await load(), held: false };
    const now = this.clock.now();
    const entry = this.#entries.get(key);
    const entries = this.#entries;
    if (entry && now - entry.at <= this.maxAgeMs) {
      readBehind(entry, now, this.maxAgeMs, load, (value, row) => {
        // Unless a change or a read after the bound replaced it meanwhile; a token gone is held
        // no more (the next request reads, and is refused).
        if (entries.get(key) !== entry) return;
        if (row === undefined) entries.delete(key);
        else entries.set(key, { at: now, value });
      });
      return { value: await entry.value, held: true };
    }
    if (entries.size >= TOKEN_CACHE_MAX) entries.clear();
    const value = load();
    entries.set(key, { at: now, value });
    const forget = (): void => {
      if (entries.get(key)?.value === value) entries.delete(key);
    };
    value.then((v) => v === undefined && forget(), forget);
    return { value: await value, held: false };
  }

  /** Forgets the token `key` (this replica refused it, or changed it). */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** A token or user changed: nothing held is served again (a load in flight is not kept). */
  changed(): void {
    this.#entries = new Map();
  }

  #onState(listening: boolean): void {
    // Either way what is held may have missed a notification: from a drop, nothing is served
    // until the connection is back; then it starts afresh.
    this.changed();
    this.#listening = listening && !this.#closed;
  }

  /** Starts listening once (and again a while after a failed attempt). */
  #listen(): void {
    if (this.#started || this.#closed) return;
    if (this.#failedAt !== undefined && this.clock.now() - this.#failedAt < LISTEN_RETRY_MS) return;
    this.#started = true;
    this.#unlisten = this.db
      .listen(
        CONFIG_CHANNEL,
        (table) => {
          if (TABLES.has(table)) this.changed();
        },
        (listening) => this.#onState(listening),
      )
      .then(
        (unlisten) => {
          if (!this.#closed) {
            this.changed();
            this.#listening = true;
          }
          return unlisten;
        },
        () => {
          this.#started = false;
          this.#failedAt = this.clock.now();
          return undefined;
        },
      );
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#listening = false;
    this.changed();
    const unlisten = await this.#unlisten;
    await unlisten?.();
  }
}
