import { expect, it } from "vitest";
import { describeDatabases } from "../../../test/support/db.ts";
import { TransactionAbortedError } from "./values.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeDatabases("type mapping", (db) => {
  it("int8 is an exact string, timestamptz a Date, jsonb parsed, bool a boolean, NULL null", async () => {
    const { rows } = await db().query(`SELECT
      9007199254740993::int8 AS big,
      42::int4 AS int, 7::int2 AS small, 1.5::float8 AS float, 1.10::numeric AS exact,
      true AS yes, false AS no, NULL::text AS nothing, NULL::jsonb AS no_doc,
      'héllo'::text AS text, '6f1c2b54-8e9f-4c1e-9b7a-1d2e3f4a5b6c'::uuid AS id,
      '2024-02-29 12:34:56.789+02'::timestamptz AS at,
      '2024-02-29 12:34:56.789'::timestamp AS local_at,
      '{"a":[1,"x",null],"b":{"c":true}}'::jsonb AS doc,
      '[1,2]'::json AS list,
      '2024-01-02'::date AS day,
      '{1,NULL,9007199254740993}'::int8[] AS bigs,
      ARRAY['a"b', 'c,d', NULL, 'e\\f']::text[] AS texts,
      ARRAY['{"k":1}'::jsonb] AS docs,
      ARRAY['2024-01-01 00:00:00+00'::timestamptz] AS ats,
      '\\x00ff'::bytea AS bytes,
      '1 day'::interval AS span`);
    expect(rows).toStrictEqual([
      {
        big: "9007199254740993",
        int: 42,
        small: 7,
        float: 1.5,
        exact: "1.10",
        yes: true,
        no: false,
        nothing: null,
        no_doc: null,
        text: "héllo",
        id: "6f1c2b54-8e9f-4c1e-9b7a-1d2e3f4a5b6c",
        at: new Date("2024-02-29T10:34:56.789Z"),
        local_at: new Date("2024-02-29T12:34:56.789Z"),
        doc: { a: [1, "x", null], b: { c: true } },
        list: [1, 2],
        day: "2024-01-02",
        bigs: ["1", null, "9007199254740993"],
        texts: ['a"b', "c,d", null, "e\\f"],
        docs: [{ k: 1 }],
        ats: [new Date("2024-01-01T00:00:00Z")],
        bytes: Buffer.from([0, 255]),
        span: "1 day",
      },
    ]);
  });

  it("parameters round-trip: Date, object, JSON text, array, bigint, boolean, bytes, null", async () => {
    const at = new Date("2025-06-01T08:09:10.123Z");
    const { rows } = await db().query(
      `SELECT $1::timestamptz AS at, $2::jsonb AS obj, $3::jsonb AS arr, $4::uuid[] AS ids,
              $5::int8 AS big, $6::bool AS flag, $7::bytea AS bytes, $8::text AS nothing,
              $9::int4 AS n, $10::text AS quoted`,
      [
        at,
        { a: 1, nested: { b: [true] } },
        JSON.stringify([{ type: "text", text: "hi" }]),
        ["6f1c2b54-8e9f-4c1e-9b7a-1d2e3f4a5b6c", "00000000-0000-4000-8000-000000000000"],
        1234567890123456789n,
        true,
        Buffer.from([1, 2, 3]),
        null,
        5,
        'it\'s "quoted"',
      ],
    );
    expect(rows).toStrictEqual([
      {
        at,
        obj: { a: 1, nested: { b: [true] } },
        arr: [{ type: "text", text: "hi" }],
        ids: ["6f1c2b54-8e9f-4c1e-9b7a-1d2e3f4a5b6c", "00000000-0000-4000-8000-000000000000"],
        big: "1234567890123456789",
        flag: true,
        bytes: Buffer.from([1, 2, 3]),
        nothing: null,
        n: 5,
        quoted: 'it\'s "quoted"',
      },
    ]);
  });

  it("bigserial IDs and column defaults come back as a string and a Date", async () => {
    await db().exec(
      "CREATE TABLE t (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())",
    );
    const { rows } = await db().query<{ id: unknown; at: unknown }>(
      "INSERT INTO t DEFAULT VALUES RETURNING id, at",
    );
    expect(rows[0]?.id).toBe("1");
    expect(rows[0]?.at).toBeInstanceOf(Date);
  });

  it("affectedRows counts written rows and is 0 for a SELECT", async () => {
    await db().exec("CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2), (3)");
    expect((await db().query("UPDATE t SET n = n + 1 WHERE n > 1")).affectedRows).toBe(2);
    expect((await db().query("SELECT * FROM t")).affectedRows).toBe(0);
    expect((await db().query("DELETE FROM t")).affectedRows).toBe(3);
  });
});

describeDatabases("transactions", (db) => {
  it("a transaction that resolves commits and returns its value", async () => {
    await db().exec("CREATE TABLE t (n int)");
    const value = await db().transaction(async (tx) => {
      await tx.query("INSERT INTO t VALUES (1)");
      return "done";
    });
    expect(value).toBe("done");
    expect((await db().query("SELECT n FROM t")).rows).toEqual([{ n: 1 }]);
  });

  it("a transaction that throws rolls back, leaves nothing and rethrows the error", async () => {
    await db().exec("CREATE TABLE t (n int)");
    const boom = new Error("boom");
    await expect(
      db().transaction(async (tx) => {
        await tx.query("INSERT INTO t VALUES (1)");
        await tx.exec("INSERT INTO t VALUES (2); INSERT INTO t VALUES (3)");
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect((await db().query("SELECT n FROM t")).rows).toEqual([]);
  });

  it("a transaction whose failed statement was caught is rolled back, not committed", async () => {
    await db().exec("CREATE TABLE t (n int)");
    await expect(
      db().transaction(async (tx) => {
        await tx.query("INSERT INTO t VALUES (1)");
        await tx.query("SELECT 1 / 0").catch(() => undefined);
      }),
    ).rejects.toBeInstanceOf(TransactionAbortedError);
    expect((await db().query("SELECT n FROM t")).rows).toEqual([]);
  });

  it("20 concurrent read-modify-write transactions under FOR UPDATE lose no update", async () => {
    await db().exec(
      "CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counter VALUES (1, 0)",
    );
    await Promise.all(
      Array.from({ length: 20 }, () =>
        db().transaction(async (tx) => {
          const { rows } = await tx.query<{ n: number }>(
            "SELECT n FROM counter WHERE id = 1 FOR UPDATE",
          );
          await sleep(2); // let the others run: only the row lock (or PGlite's mutex) orders them
          await tx.query("UPDATE counter SET n = $1 WHERE id = 1", [(rows[0]?.n ?? 0) + 1]);
        }),
      ),
    );
    expect((await db().query("SELECT n FROM counter")).rows).toEqual([{ n: 20 }]);
  });

  it("a query from another caller never runs inside someone else's transaction", async () => {
    await db().exec("CREATE TABLE t (who text)");
    let inside!: () => void;
    const started = new Promise<void>((resolve) => (inside = resolve));
    const failing = db().transaction(async (tx) => {
      await tx.query("INSERT INTO t VALUES ('tx')");
      inside();
      await sleep(50);
      throw new Error("roll back");
    });
    await started;
    const outside = db().query("INSERT INTO t VALUES ('outside')");
    await expect(failing).rejects.toThrow("roll back");
    await outside;
    // Had the outside insert run inside the transaction, the rollback would have taken it too.
    expect((await db().query("SELECT who FROM t")).rows).toEqual([{ who: "outside" }]);
  });

  it("using the database instead of tx inside a transaction fails at once with a clear message", async () => {
    await expect(db().transaction(() => db().query("SELECT 1"))).rejects.toThrow(
      /inside db\.transaction\(\): use the tx argument/,
    );
    expect((await db().query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("tx used after its transaction ended is refused", async () => {
    const tx = await db().transaction(async (t) => t);
    await expect(tx.query("SELECT 1")).rejects.toThrow(/Transaction is closed/);
  });
});
