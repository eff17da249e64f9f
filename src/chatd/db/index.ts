// The database layer's public surface: openDatabase picks the driver (Postgres when a URL is
// given, else embedded PGlite) and returns it only once the schema is migrated. It loads only
// the driver it picks (pg or PGlite, 40–60 ms of a start each); the drivers' own modules,
// pglite.ts and postgres.ts, are imported directly where one is wanted by name.

import { migrate } from "./migrate.ts";
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
  const db = await openDriver(o);
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

async function openDriver(o: OpenDatabaseOptions): Promise<Database> {
  const { schema, onError } = o;
  if (o.postgresUrl !== undefined) {
    const { openPostgres } = await import("./postgres.ts");
    return openPostgres({ url: o.postgresUrl, schema, onError });
  }
  const { openPglite } = await import("./pglite.ts");
  return openPglite({ dataDir: o.dataDir, schema, onError });
}

export { migrate, loadMigrations, type Migration } from "./migrate.ts";
export type { Database, QueryResult, Queryable, Row } from "./types.ts";
export { DatabaseError } from "./errors.ts";
export { TransactionAbortedError, sqlState } from "./values.ts";
