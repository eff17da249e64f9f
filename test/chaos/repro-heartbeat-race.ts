// Reproduces a defect the campaign found (`TETHER_TEST_DATABASE_URL=... npx tsx
// test/chaos/repro-heartbeat-race.ts`): a lease heartbeat whose statement began before an
// acquisition committed stops the runner that acquisition just started (worker.ts
// Worker.#heartbeat: "not owned" is read from a snapshot older than the runner). The runner
// exits without releasing the chat, and every later heartbeat renews its lease (heartbeat()
// renews by database ownership, not by live runners), so no replica ever runs the chat
// again: it stays `running` for as long as the replica lives.
//
// To make the race certain, a second connection holds a row lock on another chat's lease
// row, so the replica's heartbeat statement (already holding its snapshot) waits; meanwhile
// the replica acquires a new chat; then the lock is released.

import { rm } from "node:fs/promises";
import pg from "pg";
import { startFakeProvider } from "../support/fake-provider.ts";
import { killAll, startTether } from "./procs.ts";
import { createCampaignDatabase } from "./replicas.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const url = process.env.TETHER_TEST_DATABASE_URL;
if (!url) throw new Error("Set TETHER_TEST_DATABASE_URL.");
const database = await createCampaignDatabase(url);
const fake = await startFakeProvider();
// Every answer streams for about 3 s.
fake.respond(() => ({
  text: Array.from({ length: 30 }, (_, i) => `w${i}`).join(" "),
  delayMs: 100,
}));
const db = new pg.Client({ connectionString: database.url });
const locker = new pg.Client({ connectionString: database.url });
try {
  const server = await startTether([
    "server",
    ...["--listen", "127.0.0.1:0", "--postgres-url", database.url, "--no-local-workspace"],
    ...["--data-dir", `/tmp/tether-repro-${process.pid}`],
    ...["--model", "openai-compatible:m", "--model-base-url", fake.url],
    ...["--heartbeat-ms", "200", "--lease-ms", "5000"],
  ]);
  await db.connect();
  await locker.connect();
  const api = async <T>(route: string, token: string | undefined, body: unknown) => {
    const res = await fetch(new URL(route, server.url), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(token && { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify(body),
    });
    return (await res.json()) as T;
  };
  const { token } = await api<{ token: string }>("/api/v1/users/first", undefined, {
    email: "a@b.c",
    password: "a long enough password",
  });
  const owned = async (id: string) =>
    (await db.query("SELECT 1 FROM chats WHERE id = $1 AND worker_id IS NOT NULL", [id])).rows
      .length > 0;

  const a = await api<{ id: string }>("/api/v1/chats", token, { message: "first" });
  while (!(await owned(a.id))) await sleep(20);
  // Hold chat A's lease row: the next heartbeat statement takes its snapshot, then waits.
  await locker.query("BEGIN");
  await locker.query("SELECT * FROM chat_heartbeats WHERE chat_id = $1 FOR UPDATE", [a.id]);
  await sleep(500);
  const b = await api<{ id: string }>("/api/v1/chats", token, { message: "second" });
  while (!(await owned(b.id))) await sleep(20);
  await sleep(300);
  await locker.query("COMMIT");

  await sleep(10_000); // both answers take about 3 s
  const r = await db.query<{ id: string; status: string; renewed_ms: number; messages: string }>(
    `SELECT c.id, c.status,
            round(extract(epoch FROM now() - h.heartbeat_at) * 1000)::int AS renewed_ms,
            (SELECT string_agg(m.role || ': ' || m.content::text, ' | ' ORDER BY m.id)
             FROM chat_messages m WHERE m.chat_id = c.id) AS messages
     FROM chats c LEFT JOIN chat_heartbeats h ON h.chat_id = c.id WHERE c.id = ANY($1::uuid[])`,
    [[a.id, b.id]],
  );
  for (const row of r.rows) {
    const which = row.id === a.id ? "A" : "B";
    console.log(
      `chat ${which}: status ${row.status}, lease renewed ${row.renewed_ms ?? "-"} ms ago; ${row.messages}`,
    );
  }
  console.log("expected: both chats waiting, each with the whole answer (w0 ... w29)");
} finally {
  await killAll();
  await db.end().catch(() => undefined);
  await locker.end().catch(() => undefined);
  await fake.close();
  await database.drop();
  await rm(`/tmp/tether-repro-${process.pid}`, { recursive: true, force: true });
}
