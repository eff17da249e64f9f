import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

describeDatabases("workspaces", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("a workspace never answers its agent token, created or listed", async () => {
    const secret = "agent-secret-token";
    const created = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "repo", agent_url: "http://127.0.0.1:8080", agent_token: secret },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "repo",
      agent_url: "http://127.0.0.1:8080",
      owner_id: api.memberId,
    });
    expect(created.body).not.toHaveProperty("agent_token");
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    expect((list.body.workspaces as { id: string }[]).map((w) => w.id)).toEqual([created.body.id]);
    expect(JSON.stringify(list.body)).not.toContain(secret);
    const stored = await db().query("SELECT agent_token FROM workspaces WHERE id = $1", [
      created.body.id,
    ]);
    expect(stored.rows[0]!.agent_token).toBe(secret);
  });

  it("a member sees their own and shared workspaces, not another member's; an admin sees all", async () => {
    const mine = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "mine", agent_url: "http://127.0.0.1:1" },
    });
    expect(mine.status).toBe(201);
    const admins = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "admin's", agent_url: "http://127.0.0.1:2" },
    });
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, is_default) VALUES (gen_random_uuid(), 'local', 'http://127.0.0.1:3', true)",
    );
    const names = async (token: string): Promise<string[]> =>
      (
        (await api.request("GET", "/api/v1/workspaces", { token })).body.workspaces as {
          name: string;
        }[]
      )
        .map((w) => w.name)
        .sort();
    expect(await names(api.memberToken)).toEqual(["local", "mine"]);
    expect(await names(api.adminToken)).toEqual(["admin's", "local", "mine"]);
    // Nor can a member start a chat on it.
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: admins.body.id },
    });
    expect(chat.status).toBe(404);
  });

  it("bad input is a 400 naming the field", async () => {
    const url = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "x", agent_url: "ftp://example.com" },
    });
    expect(url.status).toBe(400);
    expect(url.body.detail).toContain("agent_url");
    const name = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { agent_url: "http://127.0.0.1:1" },
    });
    expect(name.status).toBe(400);
    expect(name.body.detail).toContain("name");
  });
});
