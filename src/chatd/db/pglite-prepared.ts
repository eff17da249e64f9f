// Named prepared statements for PGlite. PGlite's own query() parses, describes and plans its
// text again on every call, in six protocol exchanges with the WebAssembly backend
// (docs/benchmarks.md). Here a statement with parameters is parsed and described once under a
// name (prepared.ts's, as on Postgres), and each call is a bind, an execute and a sync in one
// exchange: the plan is kept (the session runs with generic plans), and the rows are read with
// the row description kept from the first describe. The exchanges run under the mutexes
// PGlite's query() holds, which the caller passes in.

import {
  parse,
  protocol,
  type PGlite,
  type Results,
  type Row as PgliteRow,
} from "@electric-sql/pglite";
import { PreparedNames } from "./prepared.ts";
import type { Param } from "./values.ts";

type BackendMessage = Awaited<ReturnType<PGlite["execProtocolStream"]>>[number];

interface Prepared {
  /** The parameters' type OIDs, as the backend described them. */
  paramTypes: number[];
  /** The statement's row description (undefined: it returns no rows). */
  rowDescription: BackendMessage | undefined;
}

export class PglitePrepared {
  readonly #pg: PGlite;
  readonly #names = new PreparedNames();
  /** What each prepared name of the current generation was described as. */
  readonly #described = new Map<string, Prepared>();

  constructor(pg: PGlite) {
    this.#pg = pg;
  }

  /**
   * Runs `sql` as a named statement when it has parameters, its exchanges inside `exclusive`
   * (the mutexes PGlite's query() would hold); undefined when it goes unnamed (no parameters,
   * or past PREPARED_MAX texts: the caller runs PGlite's query). A plan gone stale under a
   * migration is prepared again under a new name: at once outside a transaction; inside one
   * (`inTransaction`), which the error aborted, by the next statement.
   */
  async run<R extends PgliteRow>(
    sql: string,
    values: Param[],
    exclusive: <T>(fn: () => Promise<T>) => Promise<T>,
    inTransaction: boolean,
  ): Promise<Results<R> | undefined> {
    const name = this.#names.config(sql, values).name;
    if (name === undefined) return undefined;
    try {
      return await exclusive(() => this.#run<R>(name, sql, values));
    } catch (err) {
      if (!this.#names.stale(err)) throw err;
      this.#described.clear();
      if (inTransaction) throw err;
      const again = this.#names.config(sql, values).name;
      return again === undefined
        ? undefined
        : await exclusive(() => this.#run<R>(again, sql, values));
    }
  }

  async #run<R extends PgliteRow>(name: string, sql: string, values: Param[]): Promise<Results<R>> {
    const prepared = this.#described.get(name) ?? (await this.#prepare(name, sql));
    const serialized = values.map((v, i) => {
      if (v === null) return null;
      const serialize = this.#pg.serializers[prepared.paramTypes[i]!];
      return serialize ? serialize(v) : v;
    });
    const messages = await this.#exchange(
      protocol.serialize.bind({ statement: name, values: serialized }),
      protocol.serialize.execute({}),
    );
    const all = prepared.rowDescription ? [prepared.rowDescription, ...messages] : messages;
    return parse.parseResults(all, this.#pg.parsers)[0] as Results<R>;
  }

  async #prepare(name: string, sql: string): Promise<Prepared> {
    const messages = await this.#exchange(
      protocol.serialize.parse({ name, text: sql }),
      protocol.serialize.describe({ type: "S", name }),
    );
    const prepared: Prepared = {
      paramTypes: parse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((m) => m.name === "rowDescription"),
    };
    this.#described.set(name, prepared);
    return prepared;
  }

  /**
   * The messages and a sync, in one exchange: the backend reads them in order, skips to the
   * sync after an error (which is then thrown), and is ready for the next query either way.
   */
  async #exchange(...messages: Uint8Array[]): Promise<BackendMessage[]> {
    const parts = [...messages, protocol.serialize.sync()];
    const buffer = new Uint8Array(parts.reduce((n, m) => n + m.length, 0));
    let at = 0;
    for (const m of parts) {
      buffer.set(m, at);
      at += m.length;
    }
    return this.#pg.execProtocolStream(buffer, { syncToFs: false });
  }
}
