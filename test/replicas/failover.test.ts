// Several `bin/tether server` replicas on one Postgres, with a real agent and the fake model:
// a dead owner's chats are taken over once its lease expires, a stopped owner's at once, an
// interrupt or message sent to any replica reaches the owner, and the internal route between
// replicas opens only to the replica secret.

import { randomUUID } from "node:crypto";
import http from "node:http";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SLOTS } from "../../src/chatd/secrets/index.ts";
import { testDatabaseUrl } from "../support/db.ts";
import {
  hasToolResult,
  HEARTBEAT_MS,
  LEASE_MS,
  lastUserText,
  startCluster,
  toolResults,
  waitFor,
  type Cluster,
  type Replica,
} from "../support/replicas.ts";

const skip = testDatabaseUrl() === undefined;
if (skip) {
  console.warn(
    "TETHER_TEST_DATABASE_URL is not set: the replica tests need a Postgres server and are skipped " +
      "(e.g. TETHER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test).",
  );
}

describe.skipIf(skip)("replicas on one Postgres", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  const readMarker = (name: string) =>
    readFile(path.join(cluster.dir, name), "utf8").catch(() => "");

  /** The model runs `command` once, then answers `done`. */
  const runOnce = (command: string, timeout = "30s") =>
    cluster.fake.respond((req) =>
      hasToolResult(req)
        ? { text: "done" }
        : { toolCalls: [{ name: "execute", args: { command, timeout } }] },
    );

  /** Waits for the chat's owner; answers it and the other replica. */
  const ownerOf = async (chatId: string, replicas: Replica[]) => {
    const id = await waitFor("an owner", () => cluster.owner(chatId));
    const owner = replicas.find((r) => r.workerId === id);
    if (!owner) throw new Error(`chat owned by ${id}, not one of this test's replicas`);
    return { owner, others: replicas.filter((r) => r !== owner) };
  };

  it("after SIGKILL of the owner mid-execute, the other replica takes the chat once the lease expires: one run, one completed result", async () => {
    const replicas = await cluster.startReplicas(2);
    runOnce("echo run >> killed.txt; sleep 2");
    const chatId = await cluster.createChat(replicas[0]!, "run it");
    await waitFor("the command to start", async () => (await readMarker("killed.txt")) !== "");
    const { owner, others } = await ownerOf(chatId, replicas);
    const survivor = others[0]!;

    await owner.stop("SIGKILL");
    const killedAt = Date.now();
    await waitFor("the survivor to own the chat", async () =>
      (await cluster.owner(chatId)) === survivor.workerId ? true : undefined,
    );
    // It waited for the lease: the dead owner's last renewal was at most a heartbeat before.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(LEASE_MS - HEARTBEAT_MS - 250);

    const { status, messages } = await cluster.settle(survivor, chatId);
    expect(status).toBe("waiting");
    expect(await readMarker("killed.txt")).toBe("run\n");
    const results = toolResults(messages);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ status: "completed", exit_code: 0 });
    expect(messages.at(-1)).toMatchObject({ role: "assistant", parts: [{ text: "done" }] });
    // The dead replica's registry row is swept once it is older than a lease.
    await waitFor("the dead replica's row to go", async () => {
      const r = await cluster.db.query("SELECT 1 FROM workers WHERE id = $1", [owner.workerId]);
      return r.rows.length === 0;
    });
    await survivor.stop("SIGTERM");
  }, 90_000);

  it("after SIGTERM of the owner, the other replica acquires the chat at once, long before the lease would expire", async () => {
    const leaseMs = 60_000;
    const replicas = await cluster.startReplicas(2, ["--lease-ms", String(leaseMs)]);
    runOnce("echo run >> stopped.txt; sleep 2");
    const chatId = await cluster.createChat(replicas[0]!, "run it");
    await waitFor("the command to start", async () => (await readMarker("stopped.txt")) !== "");
    const { owner, others } = await ownerOf(chatId, replicas);
    const survivor = others[0]!;

    const stoppedAt = Date.now();
    expect(await owner.stop("SIGTERM")).toBe(0);
    await waitFor("the survivor to own the chat", async () =>
      (await cluster.owner(chatId)) === survivor.workerId ? true : undefined,
    );
    const takeoverMs = Date.now() - stoppedAt;
    expect(takeoverMs).toBeLessThan(leaseMs / 6);
    // A graceful stop deregisters.
    const rows = await cluster.db.query("SELECT 1 FROM workers WHERE id = $1", [owner.workerId]);
    expect(rows.rows).toHaveLength(0);

    const { status, messages } = await cluster.settle(survivor, chatId);
    expect(status).toBe("waiting");
    expect(await readMarker("stopped.txt")).toBe("run\n"); // the stop did not cancel the work
    const results = toolResults(messages);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ status: "completed", exit_code: 0 });
    await survivor.stop("SIGTERM");
  }, 90_000);

  it("an interrupt and a queued message sent to a replica that does not own the chat reach the owner: the foreground command is canceled, then the message runs", async () => {
    const replicas = await cluster.startReplicas(2);
    cluster.fake.respond((req) =>
      lastUserText(req).includes("second question")
        ? { text: "answer to the second question" }
        : hasToolResult(req)
          ? { text: "done" }
          : {
              toolCalls: [
                {
                  name: "execute",
                  args: { command: "echo run >> interrupted.txt; sleep 30", timeout: "60s" },
                },
              ],
            },
    );
    const chatId = await cluster.createChat(replicas[0]!, "run it");
    await waitFor("the command to start", async () => (await readMarker("interrupted.txt")) !== "");
    const { owner, others } = await ownerOf(chatId, replicas);
    const other = others[0]!;

    // Who owns the chat from here until it settles: the owner only, never the other replica.
    const owners = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const o = await cluster.owner(chatId);
        if (o) owners.add(o);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const sentAt = Date.now();
    const queued = await cluster.api<{ queued: boolean }>(
      other,
      "POST",
      `/api/v1/chats/${chatId}/messages`,
      { text: "second question", busy_behavior: "queue" },
    );
    expect(queued.queued).toBe(true);
    await cluster.api(other, "POST", `/api/v1/chats/${chatId}/interrupt`);

    const { status, messages } = await cluster.settle(other, chatId).finally(() => {
      watching = false;
    });
    await watch;
    expect([...owners]).toEqual([owner.workerId]);
    expect(status).toBe("waiting");
    expect(Date.now() - sentAt).toBeLessThan(20_000); // not the command's 30 s
    const results = toolResults(messages);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ status: "canceled" });
    expect(messages.at(-2)).toMatchObject({
      role: "user",
      parts: [{ text: "second question" }],
    });
    expect(messages.at(-1)).toMatchObject({
      role: "assistant",
      parts: [{ text: "answer to the second question" }],
    });
    expect(await readMarker("interrupted.txt")).toBe("run\n");
    await Promise.all([owner.stop("SIGTERM"), other.stop("SIGTERM")]);
  }, 90_000);

  it("the internal parts route refuses requests without the replica secret, a user's token included", async () => {
    // Registered at the address peers are told to use, not the listen address.
    const advertised = "http://replica-a.internal:3000";
    const [replica] = await cluster.startReplicas(1, ["--advertise-url", advertised]);
    const row = await cluster.db.query("SELECT address FROM workers WHERE id = $1", [
      replica!.workerId,
    ]);
    expect(row.rows).toEqual([{ address: advertised }]);
    const route = `/internal/v1/chats/${randomUUID()}/parts`;
    const status = (headers: Record<string, string>) =>
      new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
        const req = http.get(new URL(route, replica!.url), { headers, agent: false }, (res) => {
          resolve({ status: res.statusCode ?? 0, type: res.headers["content-type"] });
          req.destroy(); // the parts stream stays open otherwise
        });
        req.on("error", (err) => (req.destroyed ? undefined : reject(err)));
      });
    // Stored sealed: the row itself is not the secret.
    const stored = (await cluster.db.query<{ secret: string }>("SELECT secret FROM replica_secret"))
      .rows[0]!.secret;
    const secret = cluster.secrets.open(stored, SLOTS.replicaSecret());
    expect(secret).not.toBe(stored);
    expect((await status({ "x-tether-replica-secret": stored })).status).toBe(401);

    expect((await status({})).status).toBe(401);
    expect((await status({ authorization: `Bearer ${cluster.token()}` })).status).toBe(401);
    expect((await status({ "x-tether-replica-secret": `${secret}x` })).status).toBe(401);
    const ok = await status({ "x-tether-replica-secret": secret });
    expect(ok.status).toBe(200);
    expect(ok.type).toContain("application/x-ndjson");
    await replica!.stop("SIGTERM");
  }, 60_000);
});
