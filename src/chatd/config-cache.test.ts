import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { until } from "../../test/support/agent.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { ManualClock } from "../contract/index.ts";
import { ConfigCache } from "./config-cache.ts";
import type { Database } from "./db/index.ts";

const WAIT_BOUND_MS = 10_000;

describeDatabases("the config cache", (db) => {
  it("holds a row until a change of its table is notified, whatever statement made it", async () => {
    const cache = new ConfigCache(new ManualClock(0));
    const stop = await cache.listen(db());
    const id = randomUUID();
    await db().query(
      "INSERT INTO model_configs (id, provider, model) VALUES ($1, 'openai-compatible', 'a')",
      [id],
    );
    let reads = 0;
    const model = () =>
      cache.read("model_configs", id, async () => {
        reads++;
        const r = await db().query<{ model: string }>(
          "SELECT model FROM model_configs WHERE id = $1",
          [id],
        );
        return r.rows[0]?.model;
      });
    expect(await model()).toBe("a");
    expect(await model()).toBe("a");
    // Held (a notification is database-wide: another schema's change may flush it meanwhile).
    if (db().kind === "pglite") expect(reads).toBe(1);
    // A write outside the cache's code (an admin's psql) is seen once its notification lands.
    await db().query("UPDATE model_configs SET model = 'b' WHERE id = $1", [id]);
    await until(async () => (await model()) === "b", WAIT_BOUND_MS);
    expect(reads).toBeGreaterThanOrEqual(2);
    // A delete is seen as well.
    await db().query("DELETE FROM model_configs WHERE id = $1", [id]);
    await until(async () => (await model()) === undefined, WAIT_BOUND_MS);
    await stop();
  });
});

it("reads again once an entry is older than its bound, and never holds a failed read", async () => {
  const clock = new ManualClock(0);
  const cache = new ConfigCache(clock, 1_000);
  let n = 0;
  const read = () => cache.read("t", "k", () => Promise.resolve(++n));
  expect(await read()).toBe(1);
  clock.advance(1_000);
  expect(await read()).toBe(1);
  clock.advance(1);
  expect(await read()).toBe(2);
  await expect(cache.read("t", "bad", () => Promise.reject(new Error("down")))).rejects.toThrow();
  expect(await cache.read("t", "bad", () => Promise.resolve("up"))).toBe("up");
  cache.changed("t");
  expect(await read()).toBe(3);
});

it("reads an entry in use again behind the one it serves once it is half its bound old", async () => {
  const clock = new ManualClock(0);
  const cache = new ConfigCache(clock, 1_000);
  const loads: ((v: number) => void)[] = [];
  const read = () => cache.read("t", "k", () => new Promise<number>((r) => loads.push(r)));
  const first = read();
  loads[0]!(1);
  expect(await first).toBe(1);
  clock.advance(500);
  expect(await read()).toBe(1);
  expect(loads).toHaveLength(1);
  // Past half its bound: served at once while its read goes on (one at a time).
  clock.advance(1);
  expect(await read()).toBe(1);
  expect(await read()).toBe(1);
  expect(loads).toHaveLength(2);
  loads[1]!(2);
  await new Promise((r) => setImmediate(r));
  // Past the first read's bound, within the second's: no request waits.
  clock.advance(500);
  expect(await read()).toBe(2);
  expect(loads).toHaveLength(2);
  // A read behind an entry that a change overtook is not kept.
  clock.advance(1);
  expect(await read()).toBe(2);
  expect(loads).toHaveLength(3);
  cache.changed("t");
  loads[2]!(3);
  await new Promise((r) => setImmediate(r));
  const after = read();
  expect(loads).toHaveLength(4);
  loads[3]!(4);
  expect(await after).toBe(4);
  // A failed read behind an entry leaves it served until its bound, and is tried again.
  clock.advance(501);
  const failing = cache.read("t", "k", () => Promise.reject(new Error("down")));
  expect(await failing).toBe(4);
  await new Promise((r) => setImmediate(r));
  expect(await read()).toBe(4);
  expect(loads).toHaveLength(5);
});

it("holds nothing while the listening connection is down, and drops what it held when it drops", async () => {
  let onState: ((listening: boolean) => void) | undefined;
  const db = {
    listen: (_c: string, _n: (p: string) => void, s?: (listening: boolean) => void) => {
      onState = s;
      return Promise.resolve(() => Promise.resolve());
    },
  } as unknown as Database;
  const cache = new ConfigCache(new ManualClock(0));
  await cache.listen(db);
  let n = 0;
  const read = () => cache.read("t", "k", () => Promise.resolve(++n));
  expect(await read()).toBe(1);
  expect(await read()).toBe(1);
  onState!(false); // a notification may be lost from now on
  expect(await read()).toBe(2);
  expect(await read()).toBe(3);
  onState!(true);
  expect(await read()).toBe(4);
  expect(await read()).toBe(4);
});
