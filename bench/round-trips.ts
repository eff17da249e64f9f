// Client-side accounting of database round trips for the benchmarks: a Database that passes
// everything to another and counts each statement it sends (a transaction's BEGIN and COMMIT
// are round trips of their own on both drivers), by statement, and the transactions committed.

import type { Database, Queryable, QueryResult, Row } from "../src/chatd/db/index.ts";

/** The first words of a statement, white space collapsed: how statements are told apart. */
export function statementKey(sql: string): string {
  const s = sql.replace(/\s+/g, " ").trim();
  return s.length > 96 ? `${s.slice(0, 93)}...` : s;
}

export class CountingDatabase implements Database {
  readonly kind: Database["kind"];
  readonly #db: Database;
  /** Round trips by statement key. */
  readonly counts = new Map<string, number>();
  /**
   * Transactions that committed: each BEGIN … COMMIT, and each statement sent outside one (it
   * commits on its own, as pg_stat_database's xact_commit counts it).
   */
  commits = 0;
  /** Counting is on between start() and stop(); the counts add up over every such span. */
  #on = false;

  constructor(db: Database) {
    this.#db = db;
    this.kind = db.kind;
  }

  start(): void {
    this.#on = true;
  }

  stop(): void {
    this.#on = false;
  }

  get total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }

  #count(sql: string): void {
    if (!this.#on) return;
    const k = statementKey(sql);
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  #wrap(q: Queryable): Queryable {
    return {
      query: <R extends Row = Row>(sql: string, params?: readonly unknown[]) => {
        this.#count(sql);
        return q.query<R>(sql, params);
      },
      exec: (sql: string) => {
        this.#count(sql);
        return q.exec(sql);
      },
    };
  }

  query<R extends Row = Row>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    this.#count(sql);
    if (this.#on) this.commits += 1;
    return this.#db.query<R>(sql, params);
  }

  exec(sql: string): Promise<void> {
    this.#count(sql);
    if (this.#on) this.commits += 1;
    return this.#db.exec(sql);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    this.#count("BEGIN");
    try {
      const r = await this.#db.transaction((tx) => fn(this.#wrap(tx)));
      this.#count("COMMIT");
      if (this.#on) this.commits += 1;
      return r;
    } catch (err) {
      this.#count("ROLLBACK");
      throw err;
    }
  }

  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    this.#count(`LISTEN ${channel}`);
    return this.#db.listen(channel, onNotify);
  }

  notify(channel: string, payload: string): Promise<void> {
    this.#count(`NOTIFY ${channel}`);
    return this.#db.notify(channel, payload);
  }

  close(): Promise<void> {
    return this.#db.close();
  }
}

/** The statements sent per `per` units (steps, turns), most frequent first. */
export function roundTripLines(db: CountingDatabase, per: number, unit: string): string[] {
  const lines = [
    `database round trips per ${unit} (client side): ${(db.total / per).toFixed(2)}; committed transactions per ${unit}: ${(db.commits / per).toFixed(2)}`,
  ];
  for (const [k, n] of [...db.counts].sort((a, b) => b[1] - a[1]))
    lines.push(`  ${(n / per).toFixed(2).padStart(6)}  ${k}`);
  return lines;
}
