import { expect, it } from "vitest";
import { describeDatabases } from "../support/db.ts";
import { createLogger } from "../../src/cli/log.ts";
import { sqlState } from "../../src/chatd/db/values.ts";

const SECRET = "sk-param-secret-7f3a";

/** Everything a logger writes about `err`, as the server's log would hold it. */
function logged(err: unknown): string {
  const lines: string[] = [];
  createLogger({ destination: { write: (s: string) => void lines.push(s) } }).error(
    { err },
    "request failed",
  );
  return lines.join("");
}

async function failure(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("the statement did not fail");
}

describeDatabases("database errors", (db) => {
  it("a failed statement's error keeps its SQLSTATE and says what failed, but holds no parameter, row value or query text", async () => {
    await db().exec(
      "CREATE TABLE secrets_t (name text NOT NULL CHECK (name <> 'refused'), secret text, n int)",
    );
    const cases: [string, () => Promise<unknown>][] = [
      // A NUL in a parameter: 22021 on both drivers.
      [
        "22021",
        () =>
          db().query("INSERT INTO secrets_t (name, secret) VALUES ($1, $2)", ["a\u0000b", SECRET]),
      ],
      // A value the type refuses: the message would quote it.
      ["22P02", () => db().query("INSERT INTO secrets_t (name, n) VALUES ('x', $1)", [SECRET])],
      // A CHECK violation: Postgres's detail holds the whole failing row.
      [
        "23514",
        () =>
          db().query("INSERT INTO secrets_t (name, secret) VALUES ($1, $2)", ["refused", SECRET]),
      ],
      // The same inside a transaction, through tx.query.
      [
        "23514",
        () =>
          db().transaction((tx) =>
            tx.query("INSERT INTO secrets_t (name, secret) VALUES ($1, $2)", ["refused", SECRET]),
          ),
      ],
      // A script.
      [
        "23514",
        () => db().exec(`INSERT INTO secrets_t (name, secret) VALUES ('refused', '${SECRET}')`),
      ],
    ];
    for (const [code, run] of cases) {
      const err = await failure(run);
      expect(sqlState(err)).toBe(code);
      expect(err).toBeInstanceOf(Error);
      const text = logged(err);
      expect(text).toContain(code);
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain("INSERT INTO");
      expect(JSON.stringify(Object.entries(err as object))).not.toContain(SECRET);
      expect(String((err as Error).stack)).not.toContain(SECRET);
    }
  });

  it("what the error keeps still tells the cause: the constraint, the table, the message without values", async () => {
    await db().exec("CREATE TABLE uniq_t (email text UNIQUE)");
    await db().query("INSERT INTO uniq_t VALUES ($1)", [SECRET]);
    const err = (await failure(() =>
      db().query("INSERT INTO uniq_t VALUES ($1)", [SECRET]),
    )) as Error & { constraint?: string; table?: string };
    expect(sqlState(err)).toBe("23505");
    expect(err.message).toMatch(
      /duplicate key value violates unique constraint "uniq_t_email_key"/,
    );
    expect(err.constraint).toBe("uniq_t_email_key");
    expect(err.table).toBe("uniq_t");
    expect(logged(err)).not.toContain(SECRET);
    const typed = await failure(() => db().query("SELECT $1::int", [SECRET]));
    expect((typed as Error).message).toBe('invalid input syntax for type integer: "…"');
  });
});
