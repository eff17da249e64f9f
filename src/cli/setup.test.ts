import { afterEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { ephemeralSecretBox, SLOTS } from "../chatd/secrets/index.ts";
import { startTestApi, type TestApi } from "../api/test-support.ts";
import { ensureDefaultModel, upsertLocalWorkspace } from "./setup.ts";

const secrets = ephemeralSecretBox();
const AGENT_URL = "http://127.0.0.1:9";

describeDatabases("the local workspace", (db) => {
  let api: TestApi | undefined;
  afterEach(async () => {
    await api?.app.close();
    api = undefined;
  });

  const localRow = async () =>
    (await db().query("SELECT * FROM workspaces WHERE name = 'local'")).rows[0]!;

  async function chat(token: string, workspaceId?: string) {
    return api!.request("POST", "/api/v1/chats", {
      token,
      body: workspaceId === undefined ? {} : { workspace_id: workspaceId },
    });
  }

  async function expectOwnerOnlyUntilShared(a: TestApi, id: string): Promise<void> {
    expect((await chat(a.memberToken, id)).status).toBe(404);
    // The default workspace is not a member's either: the chat has none.
    const byDefault = await chat(a.memberToken);
    expect(byDefault.status).toBe(201);
    expect(byDefault.body.workspace_id).toBeNull();
    const listed = await a.request("GET", "/api/v1/workspaces", { token: a.memberToken });
    expect(listed.body.workspaces).toEqual([]);
    const own = await chat(a.adminToken, id);
    expect(own.status).toBe(201);
    expect((await chat(a.adminToken)).body.workspace_id).toBe(id);

    const shared = await a.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: a.adminToken,
      body: { shared: true },
    });
    expect(shared.status).toBe(200);
    expect((await chat(a.memberToken, id)).status).toBe(201);
    expect((await chat(a.memberToken)).body.workspace_id).toBe(id);
  }

  it("belongs to the owner (the first user): a member's chat on it is refused (404) until an admin shares it", async () => {
    api = await startTestApi(db(), { secrets });
    await upsertLocalWorkspace(db(), AGENT_URL, "local-token", secrets);
    const row = await localRow();
    expect(row.owner_id).toBe(api.adminId);
    await expectOwnerOnlyUntilShared(api, row.id as string);
  });

  it("a server started before any user exists gives it to the first user created", async () => {
    await upsertLocalWorkspace(db(), AGENT_URL, "local-token", secrets);
    expect((await localRow()).owner_id).toBeNull();
    api = await startTestApi(db(), { secrets });
    const row = await localRow();
    expect(row.owner_id).toBe(api.adminId);
    await expectOwnerOnlyUntilShared(api, row.id as string);
  });

  it("a restart keeps the one row and its owner, and stores the new token sealed", async () => {
    api = await startTestApi(db(), { secrets });
    await upsertLocalWorkspace(db(), AGENT_URL, "first-token", secrets);
    const first = await localRow();
    await upsertLocalWorkspace(db(), "http://127.0.0.1:10", "second-token", secrets);
    const rows = (await db().query("SELECT * FROM workspaces")).rows;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: first.id, owner_id: api.adminId, local: true });
    expect(rows[0]!.agent_token).not.toContain("second-token");
    expect(secrets.open(rows[0]!.agent_token as string, SLOTS.agentToken(first.id as string))).toBe(
      "second-token",
    );
  });
});

describeDatabases("the default model", (db) => {
  const defaults = async () =>
    // xmin: the transaction that wrote the row's version, so an UPDATE of any kind shows.
    (
      await db().query<{ id: string; model: string; is_default: boolean; xmin: string }>(
        "SELECT id, model, is_default, xmin::text FROM model_configs ORDER BY created_at",
      )
    ).rows;
  const demo = { provider: "demo", model: "demo" } as const;
  const other = { provider: "openai", model: "gpt-5" } as const;

  it("--model makes its row the default; a restart with the same --model writes nothing", async () => {
    await db().query("DELETE FROM model_configs");
    await ensureDefaultModel(db(), demo, undefined, true);
    const [first] = await defaults();
    expect(first).toMatchObject({ model: "demo", is_default: true });
    await ensureDefaultModel(db(), demo, undefined, true);
    expect(await defaults()).toEqual([first]);

    await ensureDefaultModel(db(), other, undefined, true);
    const rows = await defaults();
    expect(rows.map((r) => [r.model, r.is_default])).toEqual([
      ["demo", false],
      ["gpt-5", true],
    ]);
    // Without --model an existing default stays; with it, the earlier row is reused.
    await ensureDefaultModel(db(), demo, undefined, false);
    expect((await defaults()).map((r) => r.is_default)).toEqual([false, true]);
    await ensureDefaultModel(db(), demo, undefined, true);
    const back = await defaults();
    expect(back.map((r) => [r.id, r.is_default])).toEqual([
      [first!.id, true],
      [rows[1]!.id, false],
    ]);
  });
});
