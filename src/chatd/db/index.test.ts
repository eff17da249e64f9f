import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { testDatabaseUrl } from "../../../test/support/db.ts";
import { loadMigrations, openDatabase } from "./index.ts";

const OPEN_TIMEOUT_MS = 60_000;

describe("openDatabase", () => {
  it(
    "PGlite with a dataDir keeps its data across a reopen and is migrated once",
    async () => {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), "tether-pglite-"));
      try {
        const first = await openDatabase({ dataDir });
        try {
          expect(first.kind).toBe("pglite");
          await first.query(
            "INSERT INTO workers (id) VALUES ('00000000-0000-4000-8000-000000000001')",
          );
        } finally {
          await first.close();
        }
        const second = await openDatabase({ dataDir });
        try {
          expect((await second.query("SELECT id FROM workers")).rows).toEqual([
            { id: "00000000-0000-4000-8000-000000000001" },
          ]);
          const { rows } = await second.query("SELECT count(*) AS n FROM schema_migrations");
          expect(rows).toEqual([{ n: String((await loadMigrations()).length) }]);
        } finally {
          await second.close();
        }
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
    OPEN_TIMEOUT_MS,
  );

  it("an invalid schema name is refused before anything is opened", async () => {
    await expect(openDatabase({ schema: "Bad Name" })).rejects.toThrow(/Invalid schema "Bad Name"/);
    await expect(
      openDatabase({ postgresUrl: "postgres://127.0.0.1:1/x", schema: "a;b" }),
    ).rejects.toThrow(/Invalid schema "a;b"/);
  });

  it("an unreachable Postgres fails with a message naming the connection", async () => {
    await expect(
      openDatabase({ postgresUrl: "postgres://postgres@127.0.0.1:1/none" }),
    ).rejects.toThrow(/Could not connect to Postgres/);
  });

  it.skipIf(testDatabaseUrl() === undefined)(
    "Postgres with a schema creates it, migrates into it, and every connection uses it",
    async () => {
      const url = testDatabaseUrl() ?? "";
      const schema = `tether_test_open_${randomBytes(4).toString("hex")}`;
      try {
        const db = await openDatabase({ postgresUrl: url, schema });
        try {
          expect(db.kind).toBe("postgres");
          const inTx = await db.transaction((tx) => tx.query("SELECT current_schema() AS s"));
          expect(inTx.rows).toEqual([{ s: schema }]);
          const tables = await db.query(
            "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'chats'",
            [schema],
          );
          expect(tables.rows).toEqual([{ n: "1" }]);
          const tz = await db.query("SELECT current_setting('TimeZone') AS tz");
          expect(tz.rows).toEqual([{ tz: "UTC" }]);
        } finally {
          await db.close();
        }
      } finally {
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => admin.end());
      }
    },
  );
});
