// The node-postgres driver: a Pool for queries, one pooled client per transaction (released on
// every path, destroyed when ROLLBACK fails) and a dedicated LISTEN connection (listener.ts).
// Every connection starts with the same session settings and search_path, and parses values
// through values.ts with its own type table, never pg's process-wide one.

import pg from "pg";
import { statement, toDatabaseError } from "./errors.ts";
import { PgListener } from "./listener.ts";
import { PreparedNames } from "./prepared.ts";
import { assertNotInTransaction, inTransactionScope } from "./scope.ts";
import type { Database, Queryable, QueryResult, Row } from "./types.ts";
import {
  SESSION_SETTINGS,
  TransactionAbortedError,
  affectedRows,
  assertIdentifier,
  closedTransactionError,
  parserFor,
  sqlState,
  toParams,
} from "./values.ts";

export const DEFAULT_POOL_SIZE = 10;
/** A connection attempt that takes longer fails instead of hanging the caller. */
export const CONNECT_TIMEOUT_MS = 10_000;

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database`. */
  url: string;
  /** Schema for every connection's search_path, created when missing; server default if unset. */
  schema?: string;
  /** Pool size; DEFAULT_POOL_SIZE when undefined. The LISTEN connection is one more. */
  poolSize?: number;
  /** Receives errors no caller can: an idle connection lost, a throwing notification callback. */
  onError?: (err: unknown) => void;
}

export async function openPostgres(o: PostgresOptions): Promise<Database> {
  if (o.schema !== undefined) assertIdentifier("schema", o.schema);
  const onError = o.onError ?? ((err: unknown) => console.error("tether db:", err));
  const settings: Record<string, string> = { ...SESSION_SETTINGS };
  if (o.schema !== undefined) settings.search_path = o.schema;
  const config: pg.ClientConfig = {
    connectionString: o.url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: "tether",
    // Startup parameters: in force before the first query on every connection, pooled or not.
    // Values hold no spaces or backslashes (values.ts), so they need no escaping.
    options: Object.entries(settings)
      .map(([k, v]) => `-c ${k}=${v}`)
      .join(" "),
    // Per client, so nothing else in the process changes how this Database parses values.
    types: {
      getTypeParser: ((oid: number) => parserFor(oid)) as pg.CustomTypesConfig["getTypeParser"],
    },
  };
  const pool = new pg.Pool({ ...config, max: o.poolSize ?? DEFAULT_POOL_SIZE });
  pool.on("error", (err) =>
    onError(new Error("An idle Postgres connection failed.", { cause: err })),
  );
  try {
    if (o.schema !== undefined) await createSchema(pool, o.schema);
    else await pool.query("SELECT 1");
  } catch (err) {
    await pool.end();
    throw new Error(`Could not connect to Postgres: ${String(err)}`, { cause: err });
  }
  const listener = new PgListener({ ...config, application_name: "tether-listen" }, onError);
  return new PostgresDriver(pool, listener);
}

async function createSchema(pool: pg.Pool, schema: string): Promise<void> {
  try {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  } catch (err) {
    // Two replicas creating it at once: the loser sees a duplicate, and the schema exists.
    if (sqlState(err) !== "23505" && sqlState(err) !== "42P06") throw err;
  }
}

function toResult<R extends Row>(res: pg.QueryResult<R>): QueryResult<R> {
  return { rows: res.rows, affectedRows: affectedRows(res.command, res.rowCount) };
}

class PostgresDriver implements Database {
  readonly kind = "postgres";
  readonly #pool: pg.Pool;
  readonly #listener: PgListener;
  readonly #prepared = new PreparedNames();
  #closed = false;

  constructor(pool: pg.Pool, listener: PgListener) {
    this.#pool = pool;
    this.#listener = listener;
  }

  async query<R extends Row = Row>(
    sql: string,
    params?: readonly unknown[],
  ): Promise<QueryResult<R>> {
    this.#check("query");
    const values = toParams(params);
    try {
      return toResult(await this.#pool.query<R>(this.#prepared.config(sql, values)));
    } catch (err) {
      // A statement that failed wrote nothing: once, under its new name.
      if (!this.#prepared.stale(err)) throw toDatabaseError(err);
      return toResult(await statement(this.#pool.query<R>(this.#prepared.config(sql, values))));
    }
  }

  async exec(sql: string): Promise<void> {
    this.#check("exec");
    await statement(this.#pool.query(sql)); // no parameters: the simple protocol, several statements allowed
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    this.#check("transaction");
    const client = await this.#pool.connect();
    // A checked-out client has no pool error listener; without one a dropped connection would
    // be an uncaught 'error' event. The query in flight rejects with the error anyway.
    const ignore = (): void => undefined;
    client.on("error", ignore);
    let open = true;
    const tx: Queryable = {
      query: async <R extends Row = Row>(sql: string, params?: readonly unknown[]) => {
        if (!open) throw closedTransactionError();
        const query = client.query<R>(this.#prepared.config(sql, toParams(params)));
        // A stale plan fails the transaction; the next one prepares the statement again.
        return toResult(await statement(query.catch((err: unknown) => this.#throwStale(err))));
      },
      exec: async (sql: string) => {
        if (!open) throw closedTransactionError();
        await statement(client.query(sql));
      },
    };
    let result: T;
    try {
      await statement(client.query("BEGIN"));
      try {
        result = await inTransactionScope(this, () => fn(tx));
      } finally {
        open = false;
      }
      const commit = await statement(client.query("COMMIT"));
      // Postgres answers COMMIT of a failed transaction with ROLLBACK and no error; PGlite throws.
      if (commit.command === "ROLLBACK") throw new TransactionAbortedError();
    } catch (err) {
      await rollbackAndRelease(client, ignore);
      throw err;
    }
    client.off("error", ignore);
    client.release();
    return result;
  }

  async listen(
    channel: string,
    onNotify: (payload: string) => void,
    onState?: (listening: boolean) => void,
  ): Promise<() => Promise<void>> {
    this.#check("listen");
    assertIdentifier("notification channel", channel);
    return this.#listener.listen(channel, onNotify, onState);
  }

  async notify(channel: string, payload: string): Promise<void> {
    this.#check("notify");
    assertIdentifier("notification channel", channel);
    await this.query("SELECT pg_notify($1, $2)", [channel, payload]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#listener.close();
    await this.#pool.end();
  }

  #throwStale(err: unknown): never {
    this.#prepared.stale(err);
    throw err;
  }

  #check(method: string): void {
    if (this.#closed) throw new Error(`db.${method}() was called after db.close().`);
    assertNotInTransaction(this, method);
  }
}

/** ROLLBACK (harmless when nothing is open), then release; a client that cannot is destroyed. */
async function rollbackAndRelease(client: pg.PoolClient, ignore: () => void): Promise<void> {
  let failure: Error | undefined;
  try {
    await client.query("ROLLBACK");
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
  }
  if (failure === undefined) client.off("error", ignore); // a broken client keeps it to its end
  client.release(failure);
}
