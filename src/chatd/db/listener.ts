// The one dedicated LISTEN connection of a Postgres Database, shared by all its subscriptions.
// When the connection drops it reconnects (backoff from RECONNECT_MIN_MS doubling to
// RECONNECT_MAX_MS) and LISTENs again on every channel, so a subscription outlives the loss of
// its connection. Notifications sent while it is down are lost: they are hints, never the truth;
// a subscription's `onState` hears when the connection drops (false) and when it is back (true).

import pg from "pg";

export const RECONNECT_MIN_MS = 100;
export const RECONNECT_MAX_MS = 5_000;

interface Subscription {
  readonly onNotify: (payload: string) => void;
  readonly onState: ((listening: boolean) => void) | undefined;
}

export class PgListener {
  readonly #config: pg.ClientConfig;
  readonly #onError: (err: unknown) => void;
  readonly #subscriptions = new Map<string, Set<Subscription>>();
  /** The connected client; undefined while down. Only #connected() sets it. */
  #client: pg.Client | undefined;
  /** Serializes connects, LISTENs and UNLISTENs, so they never race each other. */
  #queue: Promise<unknown> = Promise.resolve();
  #retryMs = RECONNECT_MIN_MS;
  #retryTimer: NodeJS.Timeout | undefined;
  #closed = false;
  /** The connection dropped and is not back yet (its subscriptions were told). */
  #down = false;

  constructor(config: pg.ClientConfig, onError: (err: unknown) => void) {
    this.#config = config;
    this.#onError = onError;
  }

  /** Resolves once the channel is LISTENed on a live connection. `channel` must be validated. */
  async listen(
    channel: string,
    onNotify: (payload: string) => void,
    onState?: (listening: boolean) => void,
  ): Promise<() => Promise<void>> {
    const sub: Subscription = { onNotify, onState };
    await this.#serial(async () => {
      let subs = this.#subscriptions.get(channel);
      if (!subs) {
        subs = new Set();
        this.#subscriptions.set(channel, subs);
      }
      subs.add(sub);
      try {
        const client = await this.#connected();
        if (subs.size === 1) await client.query(`LISTEN ${channel}`);
      } catch (err) {
        this.#remove(channel, sub);
        throw err;
      }
    });
    let active = true;
    return async () => {
      if (!active) return;
      active = false;
      await this.#serial(async () => {
        if (!this.#remove(channel, sub) || !this.#client) return;
        await this.#client.query(`UNLISTEN ${channel}`).catch((err: unknown) => {
          this.#onError(err); // the connection is going away; it takes its LISTENs with it
        });
      });
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    await this.#serial(async () => {
      const client = this.#client;
      this.#client = undefined;
      await client?.end();
    });
  }

  /** Removes `sub`; true when that left its channel without subscribers. */
  #remove(channel: string, sub: Subscription): boolean {
    const subs = this.#subscriptions.get(channel);
    if (!subs?.delete(sub) || subs.size > 0) return false;
    this.#subscriptions.delete(channel);
    return true;
  }

  /** The live client, connecting (and LISTENing on every channel) first if there is none. */
  async #connected(): Promise<pg.Client> {
    if (this.#closed) throw new Error("db.listen() was called after db.close().");
    if (this.#client) return this.#client;
    const client = new pg.Client(this.#config);
    client.on("error", (err) => this.#lost(client, err));
    client.on("end", () => this.#lost(client, undefined));
    client.on("notification", (msg) => this.#deliver(msg.channel, msg.payload ?? ""));
    try {
      await client.connect();
      for (const channel of this.#subscriptions.keys()) await client.query(`LISTEN ${channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw new Error(`Could not open the LISTEN connection to Postgres: ${String(err)}`, {
        cause: err,
      });
    }
    if (this.#closed) {
      await client.end();
      throw new Error("db.listen() was called after db.close().");
    }
    this.#client = client;
    this.#retryMs = RECONNECT_MIN_MS;
    if (this.#down) {
      this.#down = false;
      this.#tellState(true);
    }
    return client;
  }

  #tellState(listening: boolean): void {
    for (const subs of [...this.#subscriptions.values()])
      for (const sub of [...subs]) {
        try {
          sub.onState?.(listening);
        } catch (err) {
          this.#onError(err);
        }
      }
  }

  #deliver(channel: string, payload: string): void {
    for (const sub of [...(this.#subscriptions.get(channel) ?? [])]) {
      try {
        sub.onNotify(payload);
      } catch (err) {
        this.#onError(err);
      }
    }
  }

  #lost(client: pg.Client, err: Error | undefined): void {
    if (client !== this.#client) return;
    this.#client = undefined;
    client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#down = true;
    this.#tellState(false);
    this.#onError(
      new Error("The LISTEN connection to Postgres dropped; reconnecting.", { cause: err }),
    );
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#retryTimer !== undefined || this.#subscriptions.size === 0) return;
    const delayMs = this.#retryMs;
    this.#retryMs = Math.min(this.#retryMs * 2, RECONNECT_MAX_MS);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#serial(() => this.#connected()).catch((err: unknown) => {
        if (this.#closed) return;
        this.#onError(err);
        this.#scheduleReconnect();
      });
    }, delayMs);
    this.#retryTimer.unref();
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }
}
