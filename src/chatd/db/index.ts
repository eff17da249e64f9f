// The database layer's public surface: openDatabase picks the driver (Postgres when a URL is
// given, else embedded PGlite) and returns it only once the schema is migrated.

import { migrate } from "./migrate.ts";
import { openPglite } from "./pglite.ts";
import { openPostgres } from "./postgres.ts";
import type { Database } from "./types.ts";

export interface OpenDatabaseOptions {
  /** A Postgres server shared by replicas; when unset the embedded PGlite is used. */
  postgresUrl?: string;
  /** PGlite's data directory; in memory when unset. Ignored with postgresUrl. */
  dataDir?: string;
  /** Schema for every connection's search_path, created when missing. */
  schema?: string;
  /** Receives errors no caller can (lost idle connections, throwing notification callbacks). */
  onError?: (err: unknown) => void;
}

export async function openDatabase(o: OpenDatabaseOptions): Promise<Database> {
  const db =
    o.postgresUrl !== undefined
      ? await openPostgres({ url: o.postgresUrl, schema: o.schema, onError: o.onError })
      : await openPglite({ dataDir: o.dataDir, schema: o.schema, onError: o.onError });
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

export { migrate, loadMigrations, type Migration } from "./migrate.ts";
export { openPglite, type PgliteDatabase, type PgliteOptions } from "./pglite.ts";
export { openPostgres, type PostgresOptions } from "./postgres.ts";
export type { Database, QueryResult, Queryable, Row } from "./types.ts";
export { DatabaseError } from "./errors.ts";
export { TransactionAbortedError, sqlState } from "./values.ts";
