// The prompt's routes (docs/prompt.md): a chat's context snapshot (read, refreshed from a real
// agent), compaction on request, the organisation's instructions (admins, audited), the
// boundary in the message list, and the per-model threshold.

import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../test/support/agent.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { insertMessage, startTestApi, type TestApi } from "./test-support.ts";

describeDatabases("prompt routes", (db) => {
  let api: TestApi;
  let agent: TestAgent;
  let workspaceId: string;
  beforeEach(async () => {
    agent = await startTestAgent();
    workspaceId = "6f1c1f6e-8c52-4a3a-9a57-0d7f0d7d2f11";
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, is_default, shared) VALUES ($1, 'local', $2, true, true)",
      [workspaceId, agent.url],
    );
    api = await startTestApi(db(), {
      defaultWorkspaceId: async () => workspaceId,
      memberAgentAddresses: () => true,
    });
  });
  afterEach(async () => {
    await api.app.close();
    await agent.close();
  });

  const newChat = async (token: string) => {
    const r = await api.request("POST", "/api/v1/chats", { token, body: { title: "t" } });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const audits = async (action: string) =>
    (
      await db().query<{ target: string | null; details: Record<string, unknown> }>(
        "SELECT target, details FROM audit_log WHERE action = $1 ORDER BY id",
        [action],
      )
    ).rows;

  it("refresh-context takes a snapshot from the agent; the chat shows its files, never their text", async () => {
    await writeFile(path.join(agent.dir, "AGENTS.md"), "secret-ish project rules\n");
    const id = await newChat(api.memberToken);
    const before = await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken });
    expect(before.body.context).toBeNull();
    const r = await api.request("POST", `/api/v1/chats/${id}/refresh-context`, {
      token: api.memberToken,
    });
    expect(r.status).toBe(200);
    const expected = {
      files: [{ path: path.join(agent.dir, "AGENTS.md"), bytes: 25, truncated: false }],
      captured_at: expect.any(String),
      directory: agent.dir,
      organization_bytes: 0,
    };
    expect(r.body.context).toEqual(expected);
    const after = await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken });
    expect(after.body.context).toEqual(expected);
    expect(api.answers.join("\n")).not.toContain("secret-ish");
    expect(await audits("chat.refresh_context")).toEqual([{ target: id, details: { files: 1 } }]);
    // Only the chat's owner refreshes it (another user's chat is not found).
    const other = await api.request("POST", `/api/v1/chats/${id}/refresh-context`, {
      token: api.adminToken,
    });
    expect(other.status).toBe(404);
  });

  it("an agent that cannot be reached answers 502 agent_unreachable and keeps the old snapshot", async () => {
    const id = await newChat(api.memberToken);
    await api.request("POST", `/api/v1/chats/${id}/refresh-context`, { token: api.memberToken });
    await db().query("UPDATE workspaces SET agent_url = 'http://127.0.0.1:9' WHERE id = $1", [
      workspaceId,
    ]);
    const r = await api.request("POST", `/api/v1/chats/${id}/refresh-context`, {
      token: api.memberToken,
    });
    expect(r.status).toBe(502);
    expect(r.body.code).toBe("agent_unreachable");
    const got = await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken });
    expect(got.body.context).toMatchObject({ directory: agent.dir });
  });

  it("organisation instructions: admins only, size-capped, audited with their size, in the next snapshot", async () => {
    const member = await api.request("PUT", "/api/v1/settings/instructions", {
      token: api.memberToken,
      body: { text: "x" },
    });
    expect(member.status).toBe(403);
    const big = await api.request("PUT", "/api/v1/settings/instructions", {
      token: api.adminToken,
      body: { text: "x".repeat(32 * 1024 + 1) },
    });
    expect(big.status).toBe(400);
    const ok = await api.request("PUT", "/api/v1/settings/instructions", {
      token: api.adminToken,
      body: { text: "Never push to main." },
    });
    expect(ok.status).toBe(200);
    expect(
      (await api.request("GET", "/api/v1/settings/instructions", { token: api.memberToken })).body,
    ).toEqual({ text: "Never push to main." });
    expect(await audits("settings.instructions")).toEqual([
      { target: null, details: { bytes: 19 } },
    ]);
    const id = await newChat(api.memberToken);
    const r = await api.request("POST", `/api/v1/chats/${id}/refresh-context`, {
      token: api.memberToken,
    });
    expect(r.body.context).toMatchObject({ organization_bytes: 19 });
  });

  it("compact: nothing to compact is 409; a waiting chat runs for it; the boundary is marked in the list", async () => {
    const id = await newChat(api.memberToken);
    const none = await api.request("POST", `/api/v1/chats/${id}/compact`, {
      token: api.memberToken,
    });
    expect(none.status).toBe(409);
    await insertMessage(db(), id, {
      role: "user",
      visibility: "both",
      content: [{ type: "text", text: "hi" }],
    });
    await insertMessage(db(), id, {
      role: "assistant",
      visibility: "both",
      content: [{ type: "text", text: "hello" }],
    });
    const r = await api.request("POST", `/api/v1/chats/${id}/compact`, { token: api.memberToken });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ status: "running" });
    const row = await db().query<{ compact_requested: boolean; status: string }>(
      "SELECT compact_requested, status FROM chats WHERE id = $1",
      [id],
    );
    expect(row.rows[0]).toEqual({ compact_requested: true, status: "running" });
    expect(await audits("chat.compact")).toEqual([{ target: id, details: { status: "running" } }]);

    await db().query(
      `INSERT INTO chat_messages (chat_id, role, visibility, content, boundary) VALUES ($1, 'system', 'both', $2, true)`,
      [
        id,
        JSON.stringify([
          {
            type: "compaction",
            summary: "Said hello.",
            messages_compacted: 2,
            prompt_tokens_before: null,
            reason: "requested",
            turn_complete: true,
          },
        ]),
      ],
    );
    const list = await api.request("GET", `/api/v1/chats/${id}/messages`, {
      token: api.memberToken,
    });
    const messages = list.body.messages as Record<string, unknown>[];
    expect(messages).toHaveLength(3);
    expect(messages.filter((m) => m.boundary === true)).toEqual([
      expect.objectContaining({
        role: "system",
        boundary: true,
        parts: [expect.objectContaining({ type: "compaction", summary: "Said hello." })],
      }),
    ]);
    expect(messages[0]).not.toHaveProperty("boundary");
  });

  it("a model's compaction threshold is set on create and patch, 1 to 100", async () => {
    const m = await api.request("POST", "/api/v1/models", {
      token: api.adminToken,
      body: { provider: "demo", model: "demo", compact_threshold_percent: 80 },
    });
    expect(m.status).toBe(201);
    expect(m.body.compact_threshold_percent).toBe(80);
    const p = await api.request("PATCH", `/api/v1/models/${m.body.id as string}`, {
      token: api.adminToken,
      body: { compact_threshold_percent: 100 },
    });
    expect(p.body.compact_threshold_percent).toBe(100);
    const bad = await api.request("PATCH", `/api/v1/models/${m.body.id as string}`, {
      token: api.adminToken,
      body: { compact_threshold_percent: 101 },
    });
    expect(bad.status).toBe(400);
  });
});
