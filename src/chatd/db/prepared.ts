// Named prepared statements for node-postgres. A statement with parameters goes out under a name
// derived from its text, so each connection parses it once and Postgres may keep its plan (an
// unnamed statement is parsed and planned again on every call: about 1 ms of the database's CPU
// for a transition's statement here, docs/benchmarks.md). The texts are the code's own, so
// the names are few; past PREPARED_MAX distinct texts a statement goes out unnamed. A prepared
// statement whose tables changed row type under it (a migration run by a newer replica) fails
// with "cached plan must not change result type": every name is then replaced by a new one,
// so each connection prepares the statement again.

import { createHash } from "node:crypto";
import type pg from "pg";
import { sqlState } from "./values.ts";

/** At most this many distinct statement texts are prepared. */
export const PREPARED_MAX = 1_000;

export class PreparedNames {
  readonly #names = new Map<string, string>();
  #generation = 0;

  /** What node-postgres is asked to run: named when it has parameters (the extended protocol). */
  config(sql: string, values: unknown[] | undefined): pg.QueryConfig {
    if (!values || values.length === 0) return { text: sql };
    let name = this.#names.get(sql);
    if (name === undefined && this.#names.size < PREPARED_MAX) {
      name = `t${this.#generation}_${createHash("sha1").update(sql).digest("hex").slice(0, 24)}`;
      this.#names.set(sql, name);
    }
    return name === undefined ? { text: sql, values } : { name, text: sql, values };
  }

  /**
   * Whether `err` says a prepared statement's plan no longer fits its tables; if so, every
   * statement is prepared again under a new name from now on.
   */
  stale(err: unknown): boolean {
    if (sqlState(err) !== "0A000" || !/cached plan must not change result type/.test(String(err)))
      return false;
    this.#names.clear();
    this.#generation += 1;
    return true;
  }
}
