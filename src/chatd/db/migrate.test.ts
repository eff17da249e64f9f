import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  describeDatabases,
  openTestDatabase,
  testDatabaseUrl,
  type DatabaseKind,
  type TestDatabase,
} from "../../../test/support/db.ts";
import { loadMigrations, migrate } from "./migrate.ts";

/** A migrations folder of the given files, removed after the test. */
async function migrationsDir(
  files: Record<string, string>,
): Promise<{ url: URL; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-migrations-"));
  for (const [name, sql] of Object.entries(files)) await writeFile(path.join(dir, name), sql);
  return {
    url: pathToFileURL(dir + path.sep),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

const COUNTING = {
  "001_log.sql": "CREATE TABLE log (n int NOT NULL);",
  "002_two.sql": "INSERT INTO log VALUES (2);",
  "003_three.sql": "INSERT INTO log VALUES (3); INSERT INTO log VALUES (33);",
};

describeDatabases("migrate", (db) => {
  it("a fresh database records every migration file once, in order", async () => {
    const files = await loadMigrations();
    const { rows } = await db().query(
      "SELECT version, name FROM schema_migrations ORDER BY version",
    );
    expect(rows).toEqual(files.map((m) => ({ version: m.version, name: m.name })));
    expect(files[0]).toMatchObject({ version: 1, name: "init" });
  });

  it("migrate is idempotent: a second run changes nothing", async () => {
    const snapshot = async () => ({
      migrations: (await db().query("SELECT * FROM schema_migrations ORDER BY version")).rows,
      columns: (
        await db().query(
          `SELECT table_name, column_name, data_type FROM information_schema.columns
            WHERE table_schema = current_schema() ORDER BY 1, 2`,
        )
      ).rows,
    });
    const before = await snapshot();
    await migrate(db());
    await migrate(db());
    expect(await snapshot()).toEqual(before);
    expect(before.columns.length).toBeGreaterThan(20);
  });
});

for (const kind of ["pglite", "postgres"] as const satisfies readonly DatabaseKind[]) {
  describe.skipIf(kind === "postgres" && testDatabaseUrl() === undefined)(
    `migrate on a fresh ${kind} database`,
    () => {
      let t: TestDatabase;
      beforeEach(async () => {
        t = await openTestDatabase(kind, { migrate: false });
      });
      afterEach(async () => {
        await t.close();
      });

      it("each file runs once, in version order, however often migrate runs", async () => {
        const dir = await migrationsDir(COUNTING);
        try {
          await migrate(t.db, dir.url);
          await migrate(t.db, dir.url);
          expect((await t.db.query("SELECT n FROM log ORDER BY n")).rows).toEqual([
            { n: 2 },
            { n: 3 },
            { n: 33 },
          ]);
        } finally {
          await dir.remove();
        }
      });

      it("a file added after the schema was up to date is applied by the next migrate", async () => {
        const { "003_three.sql": _three, ...firstTwo } = COUNTING;
        const before = await migrationsDir(firstTwo);
        const after = await migrationsDir(COUNTING);
        try {
          await migrate(t.db, before.url);
          await migrate(t.db, before.url); // up to date: nothing runs
          await migrate(t.db, after.url);
          expect((await t.db.query("SELECT n FROM log ORDER BY n")).rows).toEqual([
            { n: 2 },
            { n: 3 },
            { n: 33 },
          ]);
          const { rows } = await t.db.query("SELECT version FROM schema_migrations ORDER BY 1");
          expect(rows).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }]);
        } finally {
          await before.remove();
          await after.remove();
        }
      });

      it("a failing file leaves nothing of itself, names the file, and keeps the earlier ones", async () => {
        const dir = await migrationsDir({
          "001_ok.sql": "CREATE TABLE ok (n int);",
          "002_bad.sql": "CREATE TABLE half (n int); SELECT 1 / 0;",
        });
        try {
          await expect(migrate(t.db, dir.url)).rejects.toThrow(
            /Migration 002_bad\.sql failed: .*division by zero/,
          );
          const { rows } = await t.db.query("SELECT version FROM schema_migrations");
          expect(rows).toEqual([{ version: 1 }]);
          const half = await t.db.query("SELECT to_regclass('half') AS half");
          expect(half.rows).toEqual([{ half: null }]);
        } finally {
          await dir.remove();
        }
      });

      it("a database newer than this build is refused", async () => {
        const dir = await migrationsDir({ "001_ok.sql": "CREATE TABLE ok (n int);" });
        const newer = await migrationsDir({
          ...{ "001_ok.sql": "CREATE TABLE ok (n int);" },
          "002_more.sql": "SELECT 1;",
        });
        try {
          await migrate(t.db, newer.url);
          await expect(migrate(t.db, dir.url)).rejects.toThrow(
            /schema is at version 2, newer than this build knows \(1\)/,
          );
        } finally {
          await dir.remove();
          await newer.remove();
        }
      });

      it("misnamed migration files are refused before anything runs", async () => {
        const dir = await migrationsDir({ "1_init.sql": "CREATE TABLE ok (n int);" });
        try {
          await expect(migrate(t.db, dir.url)).rejects.toThrow(/1_init\.sql is misnamed/);
          expect((await t.db.query("SELECT to_regclass('ok') AS ok")).rows).toEqual([{ ok: null }]);
        } finally {
          await dir.remove();
        }
      });
    },
  );
}

describe.skipIf(testDatabaseUrl() === undefined)("migrate from replicas at once (postgres)", () => {
  it("concurrent migrate calls on one fresh schema all succeed and apply each file once", async () => {
    const t = await openTestDatabase("postgres", { migrate: false });
    const dir = await migrationsDir(COUNTING);
    try {
      const replicas = [t.db, ...(await Promise.all([1, 2, 3, 4].map(() => t.connect())))];
      await Promise.all(replicas.map((r) => migrate(r, dir.url)));
      expect((await t.db.query("SELECT n FROM log ORDER BY n")).rows).toEqual([
        { n: 2 },
        { n: 3 },
        { n: 33 },
      ]);
      expect((await t.db.query("SELECT version FROM schema_migrations ORDER BY 1")).rows).toEqual([
        { version: 1 },
        { version: 2 },
        { version: 3 },
      ]);
    } finally {
      await dir.remove();
      await t.close();
    }
  });

  it("concurrent migrate calls with the real migrations all succeed, each applied once", async () => {
    const t = await openTestDatabase("postgres", { migrate: false });
    try {
      const other = await t.connect();
      await Promise.all([migrate(t.db), migrate(other)]);
      const files = await loadMigrations();
      const { rows } = await t.db.query("SELECT version FROM schema_migrations ORDER BY 1");
      expect(rows).toEqual(files.map((m) => ({ version: m.version })));
    } finally {
      await t.close();
    }
  });
});
