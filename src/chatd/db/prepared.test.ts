import { describe, expect, it } from "vitest";
import { openTestDatabase, testDatabaseUrl } from "../../../test/support/db.ts";
import { PREPARED_MAX, PreparedNames } from "./prepared.ts";

describe("prepared statement names", () => {
  it("names a statement with parameters by its text, and never one without", () => {
    const p = new PreparedNames();
    const a = p.config("SELECT $1::int", [1]);
    expect(a.name).toMatch(/^t0_[0-9a-f]{24}$/);
    expect(p.config("SELECT $1::int", [2]).name).toBe(a.name);
    expect(p.config("SELECT $1::text", ["x"]).name).not.toBe(a.name);
    expect(p.config("SELECT 1; SELECT 2", [])).toEqual({ text: "SELECT 1; SELECT 2" });
    for (let i = 0; i < PREPARED_MAX; i++) p.config(`SELECT $1::int + ${i}`, [1]);
    expect(p.config("SELECT $1::int - 1", [1]).name).toBeUndefined(); // past the bound: unnamed
    expect(p.config("SELECT $1::int", [3]).name).toBe(a.name); // the named stay named
  });
});

describe.skipIf(!testDatabaseUrl())("prepared statements on Postgres", () => {
  it("a row type changed under a prepared statement (a migration) is prepared again", async () => {
    const t = await openTestDatabase("postgres", { migrate: false });
    try {
      const db = t.db;
      await db.exec("CREATE TABLE p (id int PRIMARY KEY, a text); INSERT INTO p VALUES (1, 'x')");
      const read = () => db.query("SELECT * FROM p WHERE id = $1", [1]);
      for (let i = 0; i < 3; i++) expect((await read()).rows).toEqual([{ id: 1, a: "x" }]);
      await db.exec("ALTER TABLE p ADD COLUMN b int NOT NULL DEFAULT 7");
      // Outside a transaction the statement is sent again under a new name, once.
      expect((await read()).rows).toEqual([{ id: 1, a: "x", b: 7 }]);
      await db.exec("ALTER TABLE p ADD COLUMN c int NOT NULL DEFAULT 8");
      // In a transaction it fails that transaction; the next one prepares it again.
      const inTx = () => db.transaction((tx) => tx.query("SELECT * FROM p WHERE id = $1", [1]));
      await expect(inTx()).rejects.toThrow(/cached plan must not change result type/);
      expect((await inTx()).rows).toEqual([{ id: 1, a: "x", b: 7, c: 8 }]);
      expect((await read()).rows).toEqual([{ id: 1, a: "x", b: 7, c: 8 }]);
    } finally {
      await t.close();
    }
  });
});
