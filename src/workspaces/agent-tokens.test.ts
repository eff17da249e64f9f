// Agent tokens and the registry of agent connections, on PGlite and Postgres: only a token's
// hash is stored, a revoked token opens nothing and revoking forgets the live connection, and a
// connection is one only while its replica is registered (it goes with the replica's row).

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { agentConnection, agentConnections } from "../chatd/dialout/index.ts";
import type { Database } from "../chatd/db/index.ts";
import { registerReplica, sweepReplicas } from "../chatd/replicas.ts";
import {
  agentTokenFor,
  agentTokensIn,
  mintAgentToken,
  revokeAgentTokens,
  workspaceForAgentToken,
} from "./agent-tokens.ts";

async function workspace(db: Database): Promise<string> {
  const id = randomUUID();
  await db.query("INSERT INTO workspaces (id, name, agent_url) VALUES ($1, 'w', NULL)", [id]);
  return id;
}

/** A connection row as the hub writes it, for an agent up `uptimeMs`. */
async function connect(db: Database, ws: string, workerId: string, tokenId: string, uptimeMs = 0) {
  await db.query(
    `INSERT INTO agent_connections
       (workspace_id, worker_id, connection_id, token_id, agent_instance, agent_started_at)
     VALUES ($1, $2, $3, $4, 'i', now() - make_interval(secs => $5::float8 / 1000))`,
    [ws, workerId, randomUUID(), tokenId, uptimeMs],
  );
}

describeDatabases("agent tokens", (db) => {
  it("a minted token opens its workspace; only its hash is stored", async () => {
    const ws = await workspace(db());
    const token = await mintAgentToken(db(), ws);
    expect(Buffer.from(token, "base64url")).toHaveLength(32);
    expect(await workspaceForAgentToken(db(), token)).toBe(ws);
    const rows = await db().query<{ token_hash: Buffer }>(
      "SELECT token_hash FROM workspace_agent_tokens",
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]!.token_hash.toString("hex")).not.toContain(
      Buffer.from(token).toString("hex"),
    );
    expect(await workspaceForAgentToken(db(), token + "x")).toBeUndefined();
  });

  it("the workspace's own tokens in a text are found by their hash, revoked ones too, no others", async () => {
    const ws = await workspace(db());
    const other = await workspace(db());
    const old = await mintAgentToken(db(), ws);
    await revokeAgentTokens(db(), ws);
    const current = await mintAgentToken(db(), ws);
    const foreign = await mintAgentToken(db(), other);
    const lookalike = "A".repeat(43);
    const state = JSON.stringify({ a: old, b: [current, foreign, lookalike], c: `x${current}x` });
    expect((await agentTokensIn(db(), ws, state)).sort()).toEqual([old, current].sort());
    expect(await agentTokensIn(db(), ws, "no tokens here")).toEqual([]);
  });

  it("a revoked token opens nothing, and revoking forgets the agent's live connection", async () => {
    const ws = await workspace(db());
    const token = await mintAgentToken(db(), ws);
    const workerId = randomUUID();
    await registerReplica(db(), workerId, "http://127.0.0.1:1");
    await connect(db(), ws, workerId, (await agentTokenFor(db(), token))!.tokenId);
    expect((await agentConnection(db(), ws))?.workerId).toBe(workerId);
    await revokeAgentTokens(db(), ws);
    expect(await workspaceForAgentToken(db(), token)).toBeUndefined();
    expect(await agentConnection(db(), ws)).toBeUndefined();
    // A new token after a revocation works (the next start of a workspace mints one).
    expect(await workspaceForAgentToken(db(), await mintAgentToken(db(), ws))).toBe(ws);
  });
});

describeDatabases("the registry of agent connections", (db) => {
  it("reports the holder and the agent's uptime on the database clock; a swept replica's connections are gone", async () => {
    const [a, b] = [await workspace(db()), await workspace(db())];
    const ta = (await agentTokenFor(db(), await mintAgentToken(db(), a)))!.tokenId;
    const tb = (await agentTokenFor(db(), await mintAgentToken(db(), b)))!.tokenId;
    const [alive, dead] = [randomUUID(), randomUUID()];
    await registerReplica(db(), alive, "http://alive");
    await registerReplica(db(), dead, "http://dead");
    await connect(db(), a, alive, ta, 5_000);
    await connect(db(), b, dead, tb);
    const c = await agentConnection(db(), a);
    expect(c).toMatchObject({ workerId: alive, address: "http://alive" });
    expect(c!.uptimeMs).toBeGreaterThanOrEqual(5_000);
    expect([...(await agentConnections(db(), [a, b, randomUUID()])).keys()].sort()).toEqual(
      [a, b].sort(),
    );
    await db().query("UPDATE workers SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [
      dead,
    ]);
    await sweepReplicas(db(), 60_000);
    expect(await agentConnection(db(), b)).toBeUndefined();
    expect((await agentConnection(db(), a))?.workerId).toBe(alive);
  });
});
