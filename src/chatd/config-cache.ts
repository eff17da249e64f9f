// What a replica reads of rows an admin rarely changes — a model's configuration, a workspace's
// agent address — held in memory, so a step does not read them again. A change of such a row
// notifies every replica (triggers, migration 051) and each drops what it held of that table.
// While the listening connection is down nothing is held (every read loads), and what was held
// is dropped when it drops; an entry is also read again once it is `maxAgeMs` old, so a
// notification lost without the connection noticing goes unseen that long at most. An entry in
// use is read again behind the one served once it is half that old, so no step waits for the
// read of a row the replica holds (a new chat's first step is sent ahead only when its model and
// workspace resolve at once).

import { realClock, type Clock } from "../contract/index.ts";
import type { Database } from "./db/index.ts";
import { readBehind, type HeldEntry } from "./read-behind.ts";

/** The channel the triggers notify; the payload is the table's name. */
export const CONFIG_CHANNEL = "tether_config";
/** How long a held row is used before it is read again even without a notification. */
export const CONFIG_CACHE_MS = 10_000;

type Entry = HeldEntry<unknown>;

export class ConfigCache {
  readonly #tables = new Map<string, Map<string, Entry>>();
  /** False from a drop of the listening connection until it listens again. */
  #listening = true;

  constructor(
    private readonly clock: Clock = realClock,
    private readonly maxAgeMs = CONFIG_CACHE_MS,
  ) {}

  /** `load()`'s answer for `key` of `table`, as held if read recently; a failed load is not held. */
  read<T>(table: string, key: string, load: () => Promise<T>): Promise<T> {
    if (!this.#listening) return load();
    let entries = this.#tables.get(table);
    if (!entries) this.#tables.set(table, (entries = new Map<string, Entry>()));
    const now = this.clock.now();
    const held = entries.get(key);
    const kept = entries;
    if (held && now - held.at <= this.maxAgeMs) {
      readBehind(held, now, this.maxAgeMs, load, (value) => {
        // Unless a change or a read after the bound replaced it meanwhile.
        if (kept.get(key) === held) kept.set(key, { at: now, value });
      });
      return held.value as Promise<T>;
    }
    const value = load();
    kept.set(key, { at: now, value });
    value.catch(() => {
      if (kept.get(key)?.value === value) kept.delete(key);
    });
    return value;
  }

  /** A row of `table` changed: what was held of it is read again (a load in flight too). */
  changed(table: string): void {
    this.#tables.delete(table);
  }

  /** Follows the triggers' notifications; resolves once listening, with the unsubscribe. */
  listen(db: Database): Promise<() => Promise<void>> {
    return db.listen(
      CONFIG_CHANNEL,
      (table) => this.changed(table),
      (listening) => this.#state(listening),
    );
  }

  /** The listening connection dropped (notifications may be lost) or is back. */
  #state(listening: boolean): void {
    this.#tables.clear();
    this.#listening = listening;
  }
}
