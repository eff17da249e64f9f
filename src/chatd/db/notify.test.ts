import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { describeDatabases, openTestDatabase, testDatabaseUrl } from "../../../test/support/db.ts";

const WAIT_BOUND_MS = 10_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A channel of the test's own. Notifications go to every session of a database whatever its
 * schema, and the suite's Postgres tests share one database: on `chat_changes` a test would also
 * hear the chats of the tests running beside it.
 */
function ownChannel(): string {
  return `test_${randomBytes(6).toString("hex")}`;
}

/** Polls `check` until it holds, failing after WAIT_BOUND_MS. */
async function waitFor(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_BOUND_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(10);
  }
}

describeDatabases("LISTEN/NOTIFY", (db) => {
  it("a notification sent inside a transaction is delivered after commit, not before", async () => {
    const changes = ownChannel();
    const got: string[] = [];
    const stop = await db().listen(changes, (p) => got.push(p));
    await db().transaction(async (tx) => {
      await tx.query("SELECT pg_notify($1, 'committed')", [changes]);
      await sleep(100);
      expect(got).toEqual([]);
    });
    await waitFor("the committed notification", () => got.length > 0);
    expect(got).toEqual(["committed"]);
    await stop();
  });

  it("a notification sent in a rolled-back transaction is never delivered", async () => {
    const [changes, barrierChannel] = [ownChannel(), ownChannel()];
    const got: string[] = [];
    const barrier: string[] = [];
    const stop = await db().listen(changes, (p) => got.push(p));
    const stopBarrier = await db().listen(barrierChannel, (p) => barrier.push(p));
    await expect(
      db().transaction(async (tx) => {
        await tx.query("SELECT pg_notify($1, 'rolled back')", [changes]);
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    // Sent after the rollback: had the first been delivered, it would have arrived before this.
    await db().notify(barrierChannel, "after");
    await waitFor("the barrier", () => barrier.length > 0);
    expect(got).toEqual([]);
    await stop();
    await stopBarrier();
  });

  it("db.notify reaches every subscription of the channel with its payload", async () => {
    const changes = ownChannel();
    const a: string[] = [];
    const b: string[] = [];
    const onB = (p: string) => b.push(p);
    const stopA = await db().listen(changes, (p) => a.push(p));
    const stopB1 = await db().listen(changes, onB);
    const stopB2 = await db().listen(changes, onB); // same callback twice: two subscriptions
    await db().notify(changes, '{"chat":"1","version":"2"}');
    await waitFor("all three deliveries", () => a.length === 1 && b.length === 2);
    expect(a).toEqual(['{"chat":"1","version":"2"}']);
    await stopB1();
    await stopB2();
    await stopA();
  });

  it("after unlisten a subscription gets nothing, while others on the channel still do", async () => {
    const [changes, barrierChannel] = [ownChannel(), ownChannel()];
    const stopped: string[] = [];
    const kept: string[] = [];
    const stop = await db().listen(changes, (p) => stopped.push(p));
    const stopKept = await db().listen(changes, (p) => kept.push(p));
    await db().notify(changes, "1");
    await waitFor("the first notification", () => stopped.length === 1 && kept.length === 1);
    await stop();
    await stop(); // idempotent
    await db().notify(changes, "2");
    await waitFor("the second notification", () => kept.length === 2);
    expect(stopped).toEqual(["1"]);
    expect(kept).toEqual(["1", "2"]);
    await stopKept();
    const barrier: string[] = [];
    const stopBarrier = await db().listen(barrierChannel, (p) => barrier.push(p));
    await db().notify(changes, "3");
    await db().notify(barrierChannel, "after");
    await waitFor("the barrier", () => barrier.length > 0);
    expect(kept).toEqual(["1", "2"]);
    await stopBarrier();
  });

  it("a channel that is not a plain lower-case identifier is refused", async () => {
    await expect(db().listen("Chat-Changes", () => undefined)).rejects.toThrow(
      /Invalid notification channel "Chat-Changes"/,
    );
    await expect(db().notify("x; DROP TABLE chats", "")).rejects.toThrow(
      /Invalid notification channel/,
    );
  });
});

describe.skipIf(testDatabaseUrl() === undefined)("LISTEN/NOTIFY on Postgres", () => {
  it("the LISTEN connection re-subscribes after it drops", async () => {
    const t = await openTestDatabase("postgres", { migrate: false });
    const reported: unknown[] = [];
    try {
      const db = await t.connect({ onError: (err) => reported.push(err) });
      const channel = ownChannel();
      const got: string[] = [];
      await db.listen(channel, (p) => got.push(p));
      // The listener's last statement was this LISTEN; the channel name is unique to this test.
      const killed = await t.db.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE application_name = 'tether-listen' AND query = $1`,
        [`LISTEN ${channel}`],
      );
      expect(killed.rows).toEqual([{ ok: true }]);
      await waitFor("the drop to be reported", () => reported.length > 0);
      // Notifications sent while it is down are lost by design; keep sending until one lands.
      for (let i = 0; got.length === 0; i++) {
        if (i * 100 > WAIT_BOUND_MS) throw new Error("No notification arrived after the drop");
        await t.db.notify(channel, `ping ${i}`);
        await sleep(100);
      }
      expect(got[0]).toMatch(/^ping \d+$/);
    } finally {
      await t.close();
    }
  });

  it("two Database objects on one schema see each other's notifications", async () => {
    const t = await openTestDatabase("postgres");
    try {
      const other = await t.connect();
      const got: string[] = [];
      const channel = ownChannel();
      const stop = await other.listen(channel, (p) => got.push(p));
      await t.db.notify(channel, "from the first replica");
      await waitFor("the cross-connection notification", () => got.length > 0);
      expect(got).toEqual(["from the first replica"]);
      await stop();
    } finally {
      await t.close();
    }
  });
});
