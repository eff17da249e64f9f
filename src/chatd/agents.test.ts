import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { until } from "../../test/support/agent.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { ManualClock } from "../contract/index.ts";
import { AgentPool } from "./agents.ts";
import { ConfigCache } from "./config-cache.ts";
import { ephemeralSecretBox } from "./secrets/index.ts";

const WAIT_BOUND_MS = 10_000;

describeDatabases("the agent pool", (db) => {
  it("gives a workspace's agent for a user only while they may use it, as its held row says", async () => {
    // A clock that never moves: only a notification makes the pool read a row again.
    const config = new ConfigCache(new ManualClock(0));
    const stop = await config.listen(db());
    const pool = new AgentPool(db(), { secrets: ephemeralSecretBox(), config });
    const [owner, member] = [randomUUID(), randomUUID()];
    for (const id of [owner, member])
      await db().query(
        "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'member', 'x')",
        [id, `${id}@test`],
      );
    const ws = randomUUID();
    await db().query(
      "INSERT INTO workspaces (id, owner_id, name, agent_url) VALUES ($1, $2, 'w', 'http://127.0.0.1:9')",
      [ws, owner],
    );
    const client = await pool.forWorkspace(ws);
    expect(client).toBeDefined();
    expect(await pool.forUser(ws, owner)).toBe(client);
    expect(await pool.forUser(ws, member)).toBeUndefined();
    expect(await pool.forUser(randomUUID(), owner)).toBeUndefined(); // no such workspace
    // Sharing and unsharing notify (migration 053): the held row is read again at once.
    await db().query("UPDATE workspaces SET shared = true WHERE id = $1", [ws]);
    await until(async () => (await pool.forUser(ws, member)) === client, WAIT_BOUND_MS);
    await db().query("UPDATE workspaces SET shared = false WHERE id = $1", [ws]);
    await until(async () => !(await pool.forUser(ws, member)), WAIT_BOUND_MS);
    // So does giving the workspace to someone else.
    await db().query("UPDATE workspaces SET owner_id = $2 WHERE id = $1", [ws, member]);
    await until(async () => !(await pool.forUser(ws, owner)), WAIT_BOUND_MS);
    expect(await pool.forUser(ws, member)).toBe(client);
    await stop();
  });
});
