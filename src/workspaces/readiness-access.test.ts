// The turn's wait for its template workspace never starts one its chat's owner may no longer
// use (unshared, or never theirs): it answers "go on" at once, and the tool batch refuses the
// calls (test/chatd/workspace-access.test.ts). A shared one is started as before.

import { randomUUID } from "node:crypto";
import { afterEach, expect, it } from "vitest";
import { AgentPool } from "../chatd/agents.ts";
import type { Fence } from "../chatd/chats.ts";
import { ephemeralSecretBox } from "../chatd/secrets/index.ts";
import { createChat } from "../chatd/transitions/index.ts";
import { realClock } from "../contract/index.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { awaitWorkspace } from "./readiness.ts";

const pools: AgentPool[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
});

describeDatabases("the wait for a template workspace", (db) => {
  /** A stopped template workspace of user A, shared when B's chat on it was created, then `shared`. */
  async function setup(shared: boolean) {
    const [a, b, templateId, workspaceId] = [
      randomUUID(),
      randomUUID(),
      randomUUID(),
      randomUUID(),
    ];
    for (const [id, role] of [
      [a, "admin"],
      [b, "member"],
    ])
      await db().query(
        "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, $3, 'x')",
        [id, `${id}@test`, role],
      );
    await db().query(
      "INSERT INTO templates (id, name, default_ttl_ms, created_by) VALUES ($1, 't', 0, $2)",
      [templateId, a],
    );
    await db().query(
      `INSERT INTO template_versions (template_id, version, files) VALUES ($1, 1, '{}'::jsonb)`,
      [templateId],
    );
    await db().query(
      "INSERT INTO workspaces (id, owner_id, name, template_id, shared) VALUES ($1, $2, 'box', $3, true)",
      [workspaceId, a, templateId],
    );
    const chat = await createChat(db(), {
      ownerId: b,
      workspaceId,
      modelConfigId: null,
      message: "go",
    });
    await db().query("UPDATE workspaces SET shared = $2 WHERE id = $1", [workspaceId, shared]);
    const fence: Fence = {
      chatId: chat.id,
      workerId: randomUUID(),
      runnerId: randomUUID(),
      status: "running",
      historyVersion: chat.historyVersion,
    };
    const agents = new AgentPool(db(), { secrets: ephemeralSecretBox() });
    pools.push(agents);
    const wait = (signal: AbortSignal) =>
      awaitWorkspace({ db: db(), agents, clock: realClock, pollMs: 20 }, chat, [], fence, signal);
    const builds = async () =>
      (
        await db().query<{ transition: string; reason: string }>(
          "SELECT transition, reason FROM workspace_builds WHERE workspace_id = $1",
          [workspaceId],
        )
      ).rows;
    return { wait, builds };
  }

  it("a workspace no longer shared with the chat's owner is not started: the turn goes on at once", async () => {
    const s = await setup(false);
    await expect(s.wait(AbortSignal.timeout(2_000))).resolves.toBe(true);
    expect(await s.builds()).toEqual([]);
  });

  it("a shared one is started for the member's chat and waited for", async () => {
    const s = await setup(true);
    await expect(s.wait(AbortSignal.timeout(500))).rejects.toThrow();
    expect(await s.builds()).toEqual([{ transition: "start", reason: "chat" }]);
  });
});
