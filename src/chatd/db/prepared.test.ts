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

describe.each(["pglite", "postgres"] as const)("prepared statements on %s", (kind) => {
  it.skipIf(kind === "postgres" && !testDatabaseUrl())(
    "a row type changed under a prepared statement (a migration) is prepared again",
    async () => {
      const t = await openTestDatabase(kind, { migrate: false });
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
    },
  );

  it.skipIf(kind === "postgres" && !testDatabaseUrl())(
    "a prepared statement's error leaves the connection ready, and aborts only its transaction",
    async () => {
      const t = await openTestDatabase(kind, { migrate: false });
      try {
        const db = t.db;
        await db.exec("CREATE TABLE p (id int PRIMARY KEY, a text)");
        const insert = (q: Pick<typeof db, "query">, id: number, a: unknown) =>
          q.query("INSERT INTO p VALUES ($1, $2) RETURNING *", [id, a]);
        expect((await insert(db, 1, "x")).rows).toEqual([{ id: 1, a: "x" }]);
        await expect(insert(db, 1, "again")).rejects.toMatchObject({ code: "23505" });
        expect((await insert(db, 2, null)).rows).toEqual([{ id: 2, a: null }]);
        await expect(
          db.transaction(async (tx) => {
            await insert(tx, 3, "y");
            await insert(tx, 1, "dup").catch(() => undefined);
            await tx.query("SELECT $1::int", [1]);
          }),
        ).rejects.toMatchObject({ code: "25P02" });
        const r = await db.query<{ id: number }>("SELECT id FROM p WHERE id > $1 ORDER BY id", [0]);
        expect(r.rows.map((x) => x.id)).toEqual([1, 2]);
        expect((await insert(db, 3, "z")).affectedRows).toBe(1);
      } finally {
        await t.close();
      }
    },
  );
});
