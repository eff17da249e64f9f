// Databases for tests: a fresh migrated PGlite per test, and, when TETHER_TEST_DATABASE_URL is
// set, a fresh uniquely named schema per test on that Postgres server, dropped afterwards. No two
// tests ever share data, so test files can run in parallel.

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import pg from "pg";
import { afterEach, beforeEach, describe, inject } from "vitest";
import { migrate } from "../../src/chatd/db/migrate.ts";
import { openPglite } from "../../src/chatd/db/pglite.ts";
import { openPostgres } from "../../src/chatd/db/postgres.ts";
import type { Database } from "../../src/chatd/db/types.ts";
import { dumpPgliteTemplate } from "./pglite-template.ts";

export const TEST_DATABASE_URL_ENV = "TETHER_TEST_DATABASE_URL";
/** The first PGlite of a test file runs initdb and the migrations: seconds, more under load. */
const OPEN_TIMEOUT_MS = 60_000;

export type DatabaseKind = Database["kind"];

export interface TestDatabase {
  readonly kind: DatabaseKind;
  /** The database the test uses. */
  readonly db: Database;
  /**
   * Another connection to the same data: a second `Database` on the same schema, like a second
   * replica. Postgres only: PGlite is a single connection, so multi-connection tests must run
   * on Postgres (describe them with `describe.skipIf(!testDatabaseUrl())`).
   */
  connect(o?: { onError?: (err: unknown) => void }): Promise<Database>;
  /** Closes every connection and drops the schema. Idempotent. */
  close(): Promise<void>;
}

/** The Postgres server for tests, or undefined when the Postgres runs are skipped. */
export function testDatabaseUrl(): string | undefined {
  const url = process.env[TEST_DATABASE_URL_ENV];
  return url === undefined || url === "" ? undefined : url;
}

let warned = false;
function warnPostgresSkipped(): void {
  if (warned) return;
  warned = true;
  console.warn(
    `${TEST_DATABASE_URL_ENV} is not set: the Postgres runs of the database tests are skipped and only PGlite runs. ` +
      `Set it to a server where the tests may create and drop schemas, e.g. ` +
      `${TEST_DATABASE_URL_ENV}=postgres://postgres@127.0.0.1:5432/test`,
  );
}

/**
 * Defines `describe(title)` with one nested describe per driver: "pglite" always, "postgres"
 * when TETHER_TEST_DATABASE_URL is set (else registered as skipped, with a warning). `db()`
 * returns the current test's fresh, migrated database.
 */
export function describeDatabases(title: string, body: (db: () => Database) => void): void {
  describe(title, () => {
    for (const kind of ["pglite", "postgres"] as const) {
      const available = kind === "pglite" || testDatabaseUrl() !== undefined;
      if (!available) warnPostgresSkipped();
      (available ? describe : describe.skip)(kind, () => {
        let current: TestDatabase | undefined;
        beforeEach(async () => {
          current = await openTestDatabase(kind);
        }, OPEN_TIMEOUT_MS);
        afterEach(async () => {
          const closing = current;
          current = undefined;
          await closing?.close();
        });
        body(() => {
          if (!current) throw new Error("db() is only available inside a test (it, beforeEach).");
          return current.db;
        });
      });
    }
  });
}

/**
 * A fresh database of `kind`, migrated unless `migrate: false` (for tests of migrate itself).
 * The caller closes it, in afterEach or finally.
 */
export async function openTestDatabase(
  kind: DatabaseKind,
  o: { migrate?: boolean } = {},
): Promise<TestDatabase> {
  const migrated = o.migrate ?? true;
  return kind === "pglite" ? openTestPglite(migrated) : openTestPostgres(migrated);
}

/**
 * initdb takes seconds; a data directory made once loads in under one. The migrated one comes
 * from the run's global setup (global-setup.ts) when there is one, else it is made here, once
 * per module instance (per test file, or per worker where files share modules).
 */
const templates = new Map<boolean, Promise<Blob>>();
export function pgliteTemplate(migrated: boolean): Promise<Blob> {
  let template = templates.get(migrated);
  if (!template) {
    const made = migrated ? inject("pgliteTemplate") : undefined;
    template =
      made === undefined
        ? dumpPgliteTemplate(migrated)
        : readFile(made).then((bytes) => new Blob([bytes]));
    templates.set(migrated, template);
  }
  return template;
}

/** A test's PGlite holds a few rows: a small buffer pool, zeroed at each open, starts sooner. */
export const TEST_SHARED_BUFFERS_MB = 8;

async function openTestPglite(migrated: boolean): Promise<TestDatabase> {
  const db = await openPglite({
    loadDataDir: await pgliteTemplate(migrated),
    sharedBuffersMb: TEST_SHARED_BUFFERS_MB,
  });
  return {
    kind: "pglite",
    db,
    connect: () =>
      Promise.reject(
        new Error(
          "PGlite is a single connection: a test that needs two connections to one database is postgres-only.",
        ),
      ),
    close: () => db.close(),
  };
}

let schemaCount = 0;

async function openTestPostgres(migrated: boolean): Promise<TestDatabase> {
  const url = testDatabaseUrl();
  if (url === undefined) {
    throw new Error(`Set ${TEST_DATABASE_URL_ENV} to run Postgres tests.`);
  }
  schemaCount += 1;
  const schema = `tether_test_${process.pid}_${schemaCount}_${randomBytes(4).toString("hex")}`;
  const connections: Database[] = [];
  const connect = async (c: { onError?: (err: unknown) => void } = {}): Promise<Database> => {
    const db = await openPostgres({ url, schema, poolSize: 4, onError: c.onError });
    connections.push(db);
    return db;
  };
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await Promise.all(connections.map((c) => c.close()));
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await admin.end();
    }
  };
  try {
    const db = await connect();
    if (migrated) await migrate(db);
    return { kind: "postgres", db, connect, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface ScratchDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/**
 * A fresh database `<prefix>_<random>` on the server of `url`, for what needs a database of its
 * own (a whole server, a dump); drop() removes it.
 */
export async function createScratchDatabase(url: string, prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(url);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
