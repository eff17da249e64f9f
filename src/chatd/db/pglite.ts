// The embedded driver: one PGlite instance, one connection. A transaction holds PGlite's
// transaction mutex from BEGIN to COMMIT/ROLLBACK, and every db.query, db.exec and LISTEN waits
// on that mutex, so nothing from another caller ever runs inside someone's transaction.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import {
  PGlite,
  TransactionAbortedError as PgliteTransactionAbortedError,
  type PGliteOptions,
} from "@electric-sql/pglite";
import { statement, toDatabaseError } from "./errors.ts";
import { PglitePrepared } from "./pglite-prepared.ts";
import { assertNotInTransaction, inTransactionScope } from "./scope.ts";
import type { Database, Queryable, QueryResult, Row } from "./types.ts";
import {
  TEXT_PARSERS,
  TransactionAbortedError,
  assertIdentifier,
  closedTransactionError,
  sessionSql,
  toParams,
} from "./values.ts";

const BYTEA_OID = 17;

/**
 * Postgres's default of 128 MB of shared buffers is zeroed at every open: ~2 ms per MB, a quarter
 * of a second of each server start and of each test's database. One connection's working set
 * (a chat's rows and their indexes) fits in far less; a page outside it is a read of the data
 * dir's file, which the OS caches.
 */
const SHARED_BUFFERS_MB = 32;

/** A compiled WebAssembly module (the ES2023 lib has no WebAssembly; Node has). */
type WasmModule = NonNullable<PGliteOptions["pgliteWasmModule"]>;
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> };

let compiled: Promise<WasmModule> | undefined;

/**
 * PGlite's Postgres as a compiled WebAssembly module, compiled once per process and instantiated
 * by every open. Left to itself PGlite compiles its 9 MB module at each open, and on Node 20 its
 * open resolves while that compile still holds V8's background threads: the next turn of the
 * event loop then waited 0.2–0.35 s on them, on every server start.
 */
function postgresModule(): Promise<WasmModule> {
  if (compiled === undefined) {
    const dist = path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
    compiled = readFile(path.join(dist, "pglite.wasm")).then((b) => WebAssembly.compile(b));
  }
  return compiled;
}

export interface PgliteOptions {
  /** Directory for the data, created on first use; in memory when undefined. */
  dataDir?: string;
  /** Start from a data directory dumped with `dump()` (tests: skips initdb, which takes seconds). */
  loadDataDir?: Blob;
  /**
   * Shared buffers in MB (default SHARED_BUFFERS_MB). Tests' databases hold a few rows: 8 MB
   * opens 90 ms sooner than 32.
   */
  sharedBuffersMb?: number;
  /** Schema to create and use as search_path; `public` when undefined. */
  schema?: string;
  /** Receives errors no caller can: a notification callback that threw. Default: console.error. */
  onError?: (err: unknown) => void;
}

export interface PgliteDatabase extends Database {
  readonly kind: "pglite";
  /** The data directory as a tarball, to start another instance from (`loadDataDir`). */
  dump(): Promise<Blob>;
}

export async function openPglite(o: PgliteOptions = {}): Promise<PgliteDatabase> {
  if (o.schema !== undefined) assertIdentifier("schema", o.schema);
  let pg: PGlite;
  try {
    pg = await PGlite.create({
      pgliteWasmModule: await postgresModule(),
      dataDir: o.dataDir,
      loadDataDir: o.loadDataDir,
      startParams: [
        ...PGlite.defaultStartParams,
        "-c",
        `shared_buffers=${o.sharedBuffersMb ?? SHARED_BUFFERS_MB}MB`,
      ],
    });
  } catch (err) {
    const where = o.dataDir === undefined ? "in memory" : `in ${o.dataDir}`;
    throw new Error(`Could not open the embedded PGlite database ${where}: ${String(err)}`, {
      cause: err,
    });
  }
  try {
    // values.ts decides every type; a type without an entry there stays text, as on Postgres.
    pg.parsers = { ...TEXT_PARSERS };
    const byteaToHex = pg.serializers[BYTEA_OID];
    pg.serializers[BYTEA_OID] = (v: unknown) =>
      typeof v === "string" || byteaToHex === undefined ? String(v) : byteaToHex(v);
    if (o.schema !== undefined) await pg.exec(`CREATE SCHEMA IF NOT EXISTS ${o.schema};`);
    await pg.exec(sessionSql(o.schema));
  } catch (err) {
    await pg.close();
    throw err;
  }
  return new PgliteDriver(pg, o.onError ?? ((err) => console.error("tether db:", err)));
}

class PgliteDriver implements PgliteDatabase {
  readonly kind = "pglite";
  readonly #pg: PGlite;
  readonly #onError: (err: unknown) => void;
  readonly #prepared: PglitePrepared;
  #closed = false;

  constructor(pg: PGlite, onError: (err: unknown) => void) {
    this.#pg = pg;
    this.#prepared = new PglitePrepared(pg);
    this.#onError = onError;
  }

  async query<R extends Row = Row>(
    sql: string,
    params?: readonly unknown[],
  ): Promise<QueryResult<R>> {
    this.#check("query");
    const values = toParams(params);
    const pg = this.#pg;
    // As PGlite's query(): after any transaction in progress, then exclusively; synced after.
    const res =
      (await statement(
        this.#prepared.run<R>(
          sql,
          values,
          async (fn) => {
            const r = await pg._runExclusiveTransaction(() => pg.runExclusive(fn));
            await pg.syncToFs();
            return r;
          },
          false,
        ),
      )) ?? (await statement(pg.query<R>(sql, values)));
    return { rows: res.rows, affectedRows: res.affectedRows ?? 0 };
  }

  async exec(sql: string): Promise<void> {
    this.#check("exec");
    await statement(this.#pg.exec(sql));
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    this.#check("transaction");
    try {
      return await this.#pg.transaction(async (ptx) => {
        let open = true;
        const tx: Queryable = {
          query: async <R extends Row = Row>(sql: string, params?: readonly unknown[]) => {
            if (!open) throw closedTransactionError();
            const values = toParams(params);
            // Inside the transaction, which holds its mutex: the query mutex only.
            const res =
              (await statement(
                this.#prepared.run<R>(sql, values, (fn) => this.#pg.runExclusive(fn), true),
              )) ?? (await statement(ptx.query<R>(sql, values)));
            return { rows: res.rows, affectedRows: res.affectedRows ?? 0 };
          },
          exec: async (sql: string) => {
            if (!open) throw closedTransactionError();
            await statement(ptx.exec(sql));
          },
        };
        try {
          return await inTransactionScope(this, () => fn(tx));
        } finally {
          open = false;
        }
      });
    } catch (err) {
      if (err instanceof PgliteTransactionAbortedError) throw new TransactionAbortedError();
      throw toDatabaseError(err); // BEGIN or COMMIT failed
    }
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    this.#check("listen");
    assertIdentifier("notification channel", channel);
    // A fresh function per call: PGlite keeps a Set per channel, and two listen() calls with
    // the same callback must stay two subscriptions, as on Postgres.
    const deliver = (payload: string): void => {
      try {
        onNotify(payload);
      } catch (err) {
        this.#onError(err);
      }
    };
    const stop = await this.#pg.listen(channel, deliver);
    let active = true;
    return async () => {
      if (!active || this.#closed) return;
      active = false;
      await stop();
    };
  }

  async notify(channel: string, payload: string): Promise<void> {
    this.#check("notify");
    assertIdentifier("notification channel", channel);
    await this.query("SELECT pg_notify($1, $2)", [channel, payload]);
  }

  async dump(): Promise<Blob> {
    this.#check("dump");
    return this.#pg.dumpDataDir("none");
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pg.close();
  }

  #check(method: string): void {
    if (this.#closed) throw new Error(`db.${method}() was called after db.close().`);
    assertNotInTransaction(this, method);
  }
}
