// Applies migrations/NNN_name.sql in order, each file in one transaction that also records it in
// schema_migrations. The transaction first takes an advisory lock for the schema, then checks
// again whether the file is recorded, so replicas migrating at once apply each file exactly once.

import { readdir, readFile } from "node:fs/promises";
import type { Database } from "./types.ts";

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);
const FILE_RE = /^(\d{3})_([a-z0-9_]+)\.sql$/;
/** First half of the advisory lock key ("tm"); the second half is a hash of the schema name. */
const MIGRATION_LOCK_CLASS = 0x746d;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migration files in version order; a duplicate version or a stray .sql file is an error. */
export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const m = FILE_RE.exec(file);
    if (!m?.[1] || !m[2]) {
      throw new Error(`Migration file ${file} is misnamed: use NNN_name.sql (lower case).`);
    }
    const version = Number(m[1]);
    if (migrations.some((x) => x.version === version)) {
      throw new Error(`Two migration files have version ${m[1]}; renumber one of them.`);
    }
    migrations.push({ version, name: m[2], sql: await readFile(new URL(file, dir), "utf8") });
  }
  return migrations;
}

/** Brings the database's schema up to date. Safe to run twice, and from replicas at once. */
export async function migrate(db: Database, dir: URL = MIGRATIONS_DIR): Promise<void> {
  const migrations = await loadMigrations(dir);
  const latest = migrations.at(-1)?.version ?? 0;
  if (await upToDate(db, migrations, latest)) return;
  for (const migration of migrations) {
    await db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", [
        MIGRATION_LOCK_CLASS,
      ]);
      await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const newer = await tx.query<{ version: number }>(
        "SELECT max(version) AS version FROM schema_migrations",
      );
      const recorded = newer.rows[0]?.version ?? 0;
      if (recorded > latest) {
        throw new Error(
          `The database schema is at version ${recorded}, newer than this build knows (${latest}); run a newer tether.`,
        );
      }
      const done = await tx.query("SELECT 1 FROM schema_migrations WHERE version = $1", [
        migration.version,
      ]);
      if (done.rows.length > 0) return;
      try {
        await tx.exec(migration.sql);
      } catch (err) {
        const file = `${String(migration.version).padStart(3, "0")}_${migration.name}.sql`;
        throw new Error(`Migration ${file} failed: ${String(err)}`, { cause: err });
      }
      await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
        migration.version,
        migration.name,
      ]);
    });
  }
}

/**
 * Whether every migration is already recorded: one read, no lock, so a start on an up-to-date
 * database skips a transaction per file (each start of the embedded server paid about half a
 * second for them). Migrations are only ever added, never undone, so a recorded one stays
 * applied and nothing needs the lock; a schema newer than this build is refused as below.
 */
async function upToDate(db: Database, migrations: Migration[], latest: number): Promise<boolean> {
  const table = await db.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  if (table.rows[0]?.present !== true) return false;
  const r = await db.query<{ version: number }>("SELECT version FROM schema_migrations");
  const recorded = new Set(r.rows.map((row) => row.version));
  const newest = Math.max(0, ...recorded);
  if (newest > latest) {
    throw new Error(
      `The database schema is at version ${newest}, newer than this build knows (${latest}); run a newer tether.`,
    );
  }
  return migrations.every((m) => recorded.has(m.version));
}
