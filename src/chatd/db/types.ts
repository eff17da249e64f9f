// The one database interface chatd runs on, with two drivers that run the same SQL: PGlite
// (embedded, the default) and node-postgres (a real server, shared by replicas). Both return
// the same JavaScript types for the same SQL, so nothing above this layer knows which it has.
//
// Type mapping, identical in both drivers:
//   int2/int4/float8/numeric-free numbers → number; int8 (bigint, bigserial) → string
//   (exact, for IDs); bool → boolean; text/uuid → string; timestamptz → Date;
//   json/jsonb → the parsed value; NULL → null; numeric → string (exact); date → "YYYY-MM-DD";
//   timestamp (no zone) → Date read as UTC; bytea → Buffer; arrays of these → arrays; any other
//   type → Postgres's text. Sessions run with TimeZone UTC on both.
// Parameters, identical in both drivers: Date → ISO 8601; JavaScript array → Postgres array;
//   plain object → JSON; Uint8Array → bytea. For a json/jsonb array pass JSON.stringify(value).

export type Row = Record<string, unknown>;

export interface QueryResult<R extends Row = Row> {
  rows: R[];
  /** Rows inserted, updated or deleted by the statement (0 for a SELECT, on both drivers). */
  affectedRows: number;
}

export interface Queryable {
  /** One statement with `$1`-style parameters. */
  query<R extends Row = Row>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
  /** A script of one or more statements, without parameters (migrations, test fixtures). */
  exec(sql: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly kind: "pglite" | "postgres";
  /**
   * Runs `fn` in one transaction: COMMIT when it resolves, ROLLBACK when it throws (the
   * error is rethrown). `fn` must use `tx`, never the database, inside: a call on the database
   * from `fn` throws at once. When a statement failed and `fn` caught its error, Postgres
   * rolls back at COMMIT; then this rejects with TransactionAbortedError (code 25P02).
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * LISTENs on `channel` (a lower-case identifier); `onNotify` gets each payload sent after
   * the subscription is active. Resolves once listening; the returned function stops it.
   * Notifications are hints, not the truth: on Postgres those sent while the LISTEN connection
   * is down are lost (it reconnects and re-subscribes by itself), so read state after a gap.
   * `onState` hears of such a gap: false when the connection drops (from then on notifications
   * may be lost), true once it is back and LISTENs again (PGlite, in-process, has none).
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onState?: (listening: boolean) => void,
  ): Promise<() => Promise<void>>;
  /** `pg_notify(channel, payload)`; inside a transaction use `tx.query` with pg_notify. */
  notify(channel: string, payload: string): Promise<void>;
  close(): Promise<void>;
}
