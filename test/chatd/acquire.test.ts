// Acquisition between replicas (CHATD.md 4) on a shared Postgres: a replica claims a chat at
// once when it becomes runnable and unowned, and leaves another replica's chats alone until
// their lease runs out — it runs no acquisition round for their changes.

import { afterEach, describe, expect, it } from "vitest";
import type { Database, Queryable, Row } from "../../src/chatd/db/index.ts";
import { loadChat } from "../../src/chatd/transitions/index.ts";
import type { Worker } from "../../src/chatd/worker/worker.ts";
import { startTestAgent, until } from "../support/agent.ts";
import { results, seed, settle, startChat, testWorker } from "../support/chatd.ts";
import { migrate } from "../../src/chatd/db/migrate.ts";
import { openPostgres } from "../../src/chatd/db/postgres.ts";
import { createScratchDatabase, testDatabaseUrl } from "../support/db.ts";
import { startFakeProvider } from "../support/fake-provider.ts";

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** `db`, counting the acquisition statements run through it. */
function countingClaims(db: Database): { db: Database; claims: () => number } {
  let n = 0;
  const count = (tx: Queryable): Queryable => ({
    query: (sql, params) => {
      if (sql.includes("WITH claim AS")) n += 1;
      return tx.query(sql, params);
    },
    exec: (sql) => tx.exec(sql),
  });
  const wrapped = new Proxy(db, {
    get(target, prop) {
      if (prop === "transaction") {
        return <T>(fn: (tx: Queryable) => Promise<T>) => target.transaction((tx) => fn(count(tx)));
      }
      if (prop === "query") {
        const counted = count(target); // a round is one statement
        return <R extends Row>(sql: string, params?: readonly unknown[]) =>
          counted.query<R>(sql, params);
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: wrapped, claims: () => n };
}

describe.skipIf(!testDatabaseUrl())("acquisition between replicas (postgres)", () => {
  it("a replica runs no acquisition round for the changes of a chat another replica runs", async () => {
    // A database of its own: notifications are per database, and another test's runnable chats
    // (in its own schema of the shared one) would start rounds here that this test counts.
    const scratch = await createScratchDatabase(testDatabaseUrl()!, "tether_acquire");
    cleanup.push(() => scratch.drop());
    const connections: Database[] = [];
    cleanup.push(async () => {
      for (const c of connections) await c.close();
    });
    const connect = async (): Promise<Database> => {
      const c = await openPostgres({ url: scratch.url, poolSize: 4 });
      connections.push(c);
      return c;
    };
    const t = { db: await connect(), connect };
    await migrate(t.db);
    const agent = await startTestAgent();
    cleanup.push(() => agent.close());
    const fake = await startFakeProvider();
    cleanup.push(() => fake.close());
    const setup = await seed(t.db, { agentUrl: agent.url, providerUrl: fake.url });
    // Five tool steps, each a few commits and notifications, then an answer.
    fake.respond((req) =>
      req.messages.filter((m) => m.role === "tool").length >= 5
        ? { text: "done" }
        : { toolCalls: [{ name: "execute", args: { command: "true" } }] },
    );
    const start = async (db: Database): Promise<Worker> => {
      // No periodic rounds within the test: only notifications can start one.
      const w = testWorker(db, { acquireIntervalMs: 60_000 });
      await w.start();
      cleanup.push(() => w.stop());
      return w;
    };
    const a = await start(t.db);
    const chatId = await startChat(t.db, setup, "go");
    await until(async () => (await loadChat(t.db, chatId))?.workerId === a.id);

    const other = countingClaims(await t.connect());
    const b = await start(other.db);
    expect(other.claims()).toBe(1); // its start-up round, which finds nothing to claim
    const { chat, history } = await settle(t.db, chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toHaveLength(5);
    expect(other.claims()).toBe(1);

    // A runnable chat nobody runs is claimed at once, by whichever replica is first.
    const next = await startChat(t.db, setup, "again");
    await until(async () => {
      const owner = (await loadChat(t.db, next))?.workerId;
      return owner === a.id || owner === b.id;
    });
    await until(() => other.claims() === 2); // b ran its round, whether it won or not
  }, 60_000);
});
