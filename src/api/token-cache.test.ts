import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import {
  createScratchDatabase,
  openTestDatabase,
  testDatabaseUrl,
  type DatabaseKind,
  type TestDatabase,
} from "../../test/support/db.ts";
import { CONFIG_CHANNEL } from "../chatd/config-cache.ts";
import { migrate, type Database } from "../chatd/db/index.ts";
import { openPostgres } from "../chatd/db/postgres.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { ManualClock } from "../contract/index.ts";
import { createApi } from "./app.ts";
import { startTestApi, type TestApi } from "./test-support.ts";
import { TOKEN_CACHE_MS, TokenCache } from "./token-cache.ts";

const WAIT_BOUND_MS = 10_000;

/** PGlite always; Postgres when the suite has a server. */
function databaseKinds(): DatabaseKind[] {
  return ["pglite", ...(testDatabaseUrl() === undefined ? [] : ["postgres" as const])];
}

async function waitFor(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + WAIT_BOUND_MS;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `db`, counting the bearer check's token lookups made through it. */
function countingLookups(db: Database): { db: Database; lookups: () => number } {
  let n = 0;
  const proxy = new Proxy(db, {
    get(target, key) {
      if (key === "query")
        return (sql: string, params?: unknown[]) => {
          if (sql.includes("FROM api_tokens t JOIN users u")) n += 1;
          return target.query(sql, params);
        };
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: proxy, lookups: () => n };
}

/** A fake database whose LISTEN the test drives: notifications and the connection's state. */
function drivenDatabase() {
  let notify: ((payload: string) => void) | undefined;
  let state: ((listening: boolean) => void) | undefined;
  const db = {
    listen: (
      _channel: string,
      onNotify: (payload: string) => void,
      onState?: (listening: boolean) => void,
    ) => {
      notify = onNotify;
      state = onState;
      return Promise.resolve(async () => {});
    },
  } as unknown as Database;
  return {
    db,
    notify: (payload: string) => notify?.(payload),
    state: (listening: boolean) => state?.(listening),
  };
}

describe("TokenCache", () => {
  const row = { token_id: "t" };

  it("serves a lookup again only while listening, and drops everything on a change of a token or user", async () => {
    const d = drivenDatabase();
    const clock = new ManualClock();
    const cache = new TokenCache<typeof row>(d.db, clock);
    let loads = 0;
    const load = async () => {
      loads += 1;
      return row;
    };
    // Not listening yet: read.
    expect(await cache.read("h", load)).toEqual({ value: row, held: false });
    await Promise.resolve();
    expect(cache.serving).toBe(true);
    expect((await cache.read("h", load)).held).toBe(false);
    expect((await cache.read("h", load)).held).toBe(true);
    expect(loads).toBe(2);

    d.notify("model_configs"); // not a token's table
    expect((await cache.read("h", load)).held).toBe(true);
    for (const table of ["api_tokens", "users"]) {
      d.notify(table);
      expect((await cache.read("h", load)).held).toBe(false);
      expect((await cache.read("h", load)).held).toBe(true);
    }

    // The listening connection drops: every request reads until it is back.
    d.state(false);
    expect(cache.serving).toBe(false);
    loads = 0;
    for (let i = 0; i < 3; i++) expect((await cache.read("h", load)).held).toBe(false);
    expect(loads).toBe(3);
    d.state(true);
    expect((await cache.read("h", load)).held).toBe(false);
    expect((await cache.read("h", load)).held).toBe(true);

    // Old lookups are read again.
    clock.advance(TOKEN_CACHE_MS + 1);
    expect((await cache.read("h", load)).held).toBe(false);
    await cache.close();
    expect((await cache.read("h", load)).held).toBe(false);
  });

  it("reads a lookup in use again behind the one it serves once half its bound old", async () => {
    const d = drivenDatabase();
    const clock = new ManualClock();
    const cache = new TokenCache<{ token_id: string; role: string }>(d.db, clock);
    const loads: ((v: { token_id: string; role: string } | undefined) => void)[] = [];
    const load = () =>
      new Promise<{ token_id: string; role: string } | undefined>((r) => loads.push(r));
    await cache.read("other", async () => undefined);
    await Promise.resolve();
    expect(cache.serving).toBe(true);
    const first = cache.read("h", load);
    loads[0]!({ token_id: "t", role: "admin" });
    expect(await first).toEqual({ value: { token_id: "t", role: "admin" }, held: false });
    clock.advance(TOKEN_CACHE_MS / 2 + 1);
    // Served at once, held, while its read goes on (one at a time).
    expect((await cache.read("h", load)).value?.role).toBe("admin");
    expect((await cache.read("h", load)).held).toBe(true);
    expect(loads).toHaveLength(2);
    loads[1]!({ token_id: "t", role: "member" }); // demoted meanwhile
    await new Promise((r) => setImmediate(r));
    clock.advance(TOKEN_CACHE_MS / 2);
    expect(await cache.read("h", load)).toEqual({
      value: { token_id: "t", role: "member" },
      held: true,
    });
    expect(loads).toHaveLength(2);
    // A token gone by the read behind it is held no more: the next request reads.
    clock.advance(1);
    expect((await cache.read("h", load)).held).toBe(true);
    loads[2]!(undefined);
    await new Promise((r) => setImmediate(r));
    const next = cache.read("h", load);
    expect(loads).toHaveLength(4);
    loads[3]!(undefined);
    expect(await next).toEqual({ value: undefined, held: false });
    await cache.close();
  });

  it("holds neither an unknown token nor a lookup that a change overtook", async () => {
    const d = drivenDatabase();
    const cache = new TokenCache<typeof row>(d.db, new ManualClock());
    await cache.read("h", async () => row);
    await Promise.resolve();
    expect(cache.serving).toBe(true);
    expect((await cache.read("unknown", async () => undefined)).held).toBe(false);
    expect((await cache.read("unknown", async () => row)).held).toBe(false);

    let finish!: (r: typeof row) => void;
    const slow = cache.read("late", () => new Promise((r) => (finish = r)));
    d.notify("api_tokens"); // committed while the lookup was in flight
    finish(row);
    expect((await slow).held).toBe(false);
    expect((await cache.read("late", async () => row)).held).toBe(false);
    await cache.close();
  });
});

/**
 * A database of the test's own. Notifications and LISTEN sessions are per database, whatever the
 * schema, so on Postgres the tests that count notifications or end listeners take one: in the
 * suite's shared database, tests running beside them change workspaces and users and listen on
 * the same channel (issue 15's CI saw a notification land mid-test and two listeners to end).
 */
async function ownDatabase(
  kind: DatabaseKind,
  onError?: (err: unknown) => void,
): Promise<{ db: Database; close(): Promise<void> }> {
  if (kind === "pglite") return openTestDatabase("pglite");
  const scratch = await createScratchDatabase(testDatabaseUrl()!, "tether_test_triggers");
  try {
    const db = await openPostgres({ url: scratch.url, poolSize: 2, onError });
    await migrate(db).catch(async (err: unknown) => {
      await db.close();
      throw err;
    });
    return {
      db,
      async close() {
        await db.close();
        await scratch.drop();
      },
    };
  } catch (err) {
    await scratch.drop();
    throw err;
  }
}

describe("the triggers of token changes", () => {
  for (const kind of databaseKinds()) {
    it(`${kind}: notify a change of a token or a user, not a refresh of last_used_at`, async () => {
      const t = await ownDatabase(kind);
      const db = () => t.db;
      let api: TestApi | undefined;
      try {
        api = await startTestApi(db());
        const got: string[] = [];
        const stop = await db().listen(CONFIG_CHANNEL, (p) => got.push(p));
        const barrier = async (name: string): Promise<string[]> => {
          await db().notify(CONFIG_CHANNEL, name);
          await waitFor(name, () => got.includes(name));
          return got.splice(0).filter((p) => p !== name);
        };
        await barrier("start");
        await db().query("UPDATE api_tokens SET last_used_at = now()");
        expect(await barrier("used")).toEqual([]);
        await db().query("UPDATE api_tokens SET expires_at = now() + interval '1 day'");
        expect(await barrier("expiry")).toEqual(["api_tokens"]);
        await db().query("UPDATE users SET name = 'B' WHERE id = $1", [api.memberId]);
        expect(await barrier("user")).toEqual(["users"]);
        await db().query("DELETE FROM api_tokens WHERE user_id = $1", [api.memberId]);
        expect(await barrier("revoked")).toEqual(["api_tokens"]);
        await db().query("DELETE FROM users WHERE id = $1", [api.memberId]);
        // Their workspaces lose their owner too (ON DELETE SET NULL): who may use one changed
        // (migration 053).
        expect(new Set(await barrier("deleted"))).toEqual(
          new Set(["users", "api_tokens", "workspaces"]),
        );
        await stop();
      } finally {
        await api?.app.close();
        await t.close();
      }
    });
  }
});

describe("a token change seen by another replica", () => {
  for (const kind of databaseKinds()) {
    describe(kind, () => {
      let t: TestDatabase | undefined;
      let api: TestApi | undefined;
      let other: FastifyInstance | undefined;
      afterEach(async () => {
        await other?.close();
        await api?.app.close();
        await t?.close();
        other = api = t = undefined;
      });

      /**
       * The first replica (test-support's API) and a second one on the same database (its own
       * connections on Postgres), whose clock stands still: only a notification ends what it holds.
       */
      const replicas = async () => {
        t = await openTestDatabase(kind);
        api = await startTestApi(t.db);
        const counted = countingLookups(kind === "postgres" ? await t.connect() : t.db);
        other = await createApi({
          db: counted.db,
          buffer: new StreamBuffer(),
          clock: new ManualClock(Date.now()),
        });
        const get = async (url: string, token: string) =>
          (
            await other!.inject({
              method: "GET",
              url,
              headers: { authorization: `Bearer ${token}` },
            })
          ).statusCode;
        return { api, get, lookups: counted.lookups };
      };

      /** `token` is held by the second replica: a request there reads nothing. */
      const held = async (
        r: Awaited<ReturnType<typeof replicas>>,
        url: string,
        token: string,
        status = 200,
      ) => {
        await waitFor("the second replica to hold the token", async () => {
          const before = r.lookups();
          return (await r.get(url, token)) === status && r.lookups() === before;
        });
      };

      it("a revoked token stops working there once the notification lands", async () => {
        const r = await replicas();
        await held(r, "/api/v1/me", r.api.memberToken);
        const out = await r.api.request("POST", "/api/v1/auth/logout", {
          token: r.api.memberToken,
        });
        expect(out.status).toBe(204);
        await waitFor(
          "the revocation",
          async () => (await r.get("/api/v1/me", r.api.memberToken)) === 401,
        );
        // And stays refused: an unknown token is never held.
        expect(await r.get("/api/v1/me", r.api.memberToken)).toBe(401);
      });

      it("a disabled user and a demoted admin lose their access there once the notification lands", async () => {
        const r = await replicas();
        const admin = await r.api.request("POST", "/api/v1/users", {
          token: r.api.adminToken,
          body: { email: "second@example.com", password: "second password", role: "admin" },
        });
        expect(admin.status).toBe(201);
        const login = await r.api.request("POST", "/api/v1/auth/login", {
          body: { email: "second@example.com", password: "second password" },
        });
        const adminToken = login.body.token as string;
        await held(r, "/api/v1/users", adminToken);
        const demoted = await r.api.request("PATCH", `/api/v1/users/${admin.body.id as string}`, {
          token: r.api.adminToken,
          body: { role: "member" },
        });
        expect(demoted.status).toBe(200);
        await waitFor(
          "the demotion",
          async () => (await r.get("/api/v1/users", adminToken)) === 403,
        );
        expect(await r.get("/api/v1/me", adminToken)).toBe(200);

        await held(r, "/api/v1/me", r.api.memberToken);
        const disabled = await r.api.request("PATCH", `/api/v1/users/${r.api.memberId}`, {
          token: r.api.adminToken,
          body: { disabled: true },
        });
        expect(disabled.status).toBe(200);
        await waitFor(
          "the disable",
          async () => (await r.get("/api/v1/me", r.api.memberToken)) === 401,
        );
      });

      it("a held session is read again before it is refused: its use on another replica counts", async () => {
        // Both replicas on one clock, sessions ending after 4 s unused (within a held lookup's age).
        t = await openTestDatabase(kind);
        const clock = new ManualClock(Date.now());
        api = await startTestApi(t.db, { clock, sessionIdleMs: 4_000 });
        other = await createApi({
          db: kind === "postgres" ? await t.connect() : t.db,
          buffer: new StreamBuffer(),
          clock,
          sessionIdleMs: 4_000,
        });
        const onOther = async () =>
          (
            await other!.inject({
              method: "GET",
              url: "/api/v1/me",
              headers: { authorization: `Bearer ${api!.memberToken}` },
            })
          ).statusCode;
        expect(await onOther()).toBe(200); // read, and held
        expect(await onOther()).toBe(200);
        clock.advance(3_000);
        // Used on the first replica: last_used_at moves (no notification: it is no revocation).
        const me = await api.request("GET", "/api/v1/me", { token: api.memberToken });
        expect(me.status).toBe(200);
        clock.advance(1_500);
        // The second replica's held row says 4.5 s unused; the row says 1.5 s.
        expect(await onOther()).toBe(200);
      });

      it("a role changed by a statement of no route is seen there too (the trigger)", async () => {
        const r = await replicas();
        await held(r, "/api/v1/users", r.api.adminToken);
        await t!.db.query("UPDATE users SET role = 'member' WHERE id = $1", [r.api.adminId]);
        await waitFor(
          "the demotion",
          async () => (await r.get("/api/v1/users", r.api.adminToken)) === 403,
        );
      });
    });
  }
});

describe.skipIf(testDatabaseUrl() === undefined)(
  "a token cache whose LISTEN connection drops",
  () => {
    it("serves nothing held from the drop until the connection is back", async () => {
      const t = await ownDatabase("postgres", () => undefined);
      try {
        const cache = new TokenCache<{ id: number }>(t.db, new ManualClock());
        let loads = 0;
        const load = async () => ({ id: ++loads });
        await cache.read("h", load);
        await waitFor("the cache to listen", () => cache.serving);
        await cache.read("h", load);
        expect((await cache.read("h", load)).held).toBe(true);
        const killed = await t.db.query<{ ok: boolean }>(
          `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'tether-listen'
            AND query = $1`,
          [`LISTEN ${CONFIG_CHANNEL}`],
        );
        expect(killed.rows).toEqual([{ ok: true }]);
        // Each read while down is a read, never a held answer; then it listens again by itself.
        let readWhileDown = false;
        await waitFor("the drop to be noticed", () => !cache.serving);
        while (!cache.serving) {
          const before = loads;
          const r = await cache.read("h", load);
          if (!cache.serving) {
            expect(r.held).toBe(false);
            expect(loads).toBe(before + 1);
            readWhileDown = true;
          }
          await new Promise((res) => setTimeout(res, 10));
        }
        expect(readWhileDown).toBe(true);
        // Back: what was held before the drop is not served; a new read is held again.
        expect((await cache.read("h", load)).held).toBe(false);
        expect((await cache.read("h", load)).held).toBe(true);
        await cache.close();
      } finally {
        await t.close();
      }
    });
  },
);
