import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import {
  appendBuildLog,
  claimBuilds,
  expireBuilds,
  finishBuild,
  LEASE_EXPIRED_ERROR,
} from "../workspaces/index.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

const FILES = { "main.tf": 'resource "terraform_data" "x" {}\n' };

describeDatabases("templates and template workspaces", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  const createTemplate = async (body: Record<string, unknown> = {}) => {
    const r = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: FILES, ...body },
    });
    expect(r.status).toBe(201);
    return r.body as { id: string; version: number };
  };
  const createWorkspace = async (templateId: string, token = api.memberToken) => {
    const r = await api.request("POST", "/api/v1/workspaces", {
      token,
      body: { name: "mine", template_id: templateId, ttl_ms: 60_000 },
    });
    expect(r.status).toBe(201);
    return r.body as { id: string; latest_build: { id: string } };
  };

  it("only admins create, change and delete templates; members list them without their files", async () => {
    const member = await api.request("POST", "/api/v1/templates", {
      token: api.memberToken,
      body: { name: "dev", files: FILES },
    });
    expect(member.status).toBe(403);
    const t = await createTemplate({ description: "A dev box", default_ttl_ms: 120_000 });
    expect(t).toMatchObject({
      name: "dev",
      description: "A dev box",
      version: 1,
      default_ttl_ms: 120_000,
      workspace_count: 0,
    });
    const list = await api.request("GET", "/api/v1/templates", { token: api.memberToken });
    expect(list.body.templates).toMatchObject([{ id: t.id, name: "dev" }]);
    const asMember = await api.request("GET", `/api/v1/templates/${t.id}`, {
      token: api.memberToken,
    });
    expect(asMember.body).not.toHaveProperty("files");
    const asAdmin = await api.request("GET", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
    });
    expect(asAdmin.body.files).toEqual(FILES);
    const dup = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: FILES },
    });
    expect(dup.status).toBe(409);
  });

  it("bad files are a 400 naming the field", async () => {
    const r = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: { "../main.tf": "" } },
    });
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/^files:/);
  });

  it("new files make a new version; the same files change nothing; running workspaces keep theirs until the next start", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    const same = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
      body: { files: FILES },
    });
    expect(same.body.version).toBe(1);
    const changed = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
      body: { files: { ...FILES, "extra.tf": "" }, default_ttl_ms: 0 },
    });
    expect(changed.body).toMatchObject({ version: 2, default_ttl_ms: 0 });
    const ws = await api.request("GET", `/api/v1/workspaces/${w.id}`, { token: api.memberToken });
    expect(ws.body).toMatchObject({ template_version: 1, ttl_ms: 60_000 });
  });

  it("a template a workspace uses cannot be deleted (409)", async () => {
    const t = await createTemplate();
    await createWorkspace(t.id);
    const r = await api.request("DELETE", `/api/v1/templates/${t.id}`, { token: api.adminToken });
    expect(r.status).toBe(409);
    const unused = await createTemplate({ name: "other" });
    const ok = await api.request("DELETE", `/api/v1/templates/${unused.id}`, {
      token: api.adminToken,
    });
    expect(ok.status).toBe(204);
  });

  it("a workspace from a template is created starting, with its first build queued; builds list newest first", async () => {
    const t = await createTemplate({ default_ttl_ms: 90_000 });
    const r = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "mine", template_id: t.id },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      name: "mine",
      owner_id: api.memberId,
      status: "starting",
      template_id: t.id,
      ttl_ms: 90_000,
      deadline: null,
      agent: { connected: false },
      latest_build: { transition: "start", reason: "user", status: "pending" },
    });
    expect(r.body).not.toHaveProperty("health");
    const id = r.body.id as string;
    const builds = await api.request("GET", `/api/v1/workspaces/${id}/builds`, {
      token: api.memberToken,
    });
    expect(builds.body.builds).toMatchObject([{ transition: "start", status: "pending" }]);
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    expect(list.body.workspaces).toMatchObject([{ id, status: "starting" }]);
    // Another member sees nothing of it.
    const admin = await api.request("GET", `/api/v1/workspaces/${id}/builds`, {
      token: api.adminToken,
    });
    expect(admin.status).toBe(200);
    const unknown = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "x", template_id: "00000000-0000-4000-8000-000000000000" },
    });
    expect(unknown.status).toBe(404);
  });

  it("one build at a time: a start or stop while a build is pending is a 409", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    for (const op of ["start", "stop"]) {
      const r = await api.request("POST", `/api/v1/workspaces/${w.id}/${op}`, {
        token: api.memberToken,
      });
      expect([op, r.status]).toEqual([op, 409]);
    }
    const del = await api.request("DELETE", `/api/v1/workspaces/${w.id}`, {
      token: api.memberToken,
    });
    expect(del.status).toBe(409);
  });

  it("stopping a workspace a chat runs on is refused until the chat is interrupted", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    // The start succeeds (as a replica would record it).
    const [b] = await claimBuilds(db(), "00000000-0000-4000-8000-000000000001", 1);
    await db().transaction((tx) =>
      finishBuild(tx, b!, "00000000-0000-4000-8000-000000000001", { status: "succeeded" }),
    );
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: w.id, message: "hello" },
    });
    const stop = await api.request("POST", `/api/v1/workspaces/${w.id}/stop`, {
      token: api.memberToken,
    });
    expect(stop.status).toBe(409);
    expect(stop.body.message).toMatch(/1 chat is running/);
    await api.request("POST", `/api/v1/chats/${chat.body.id as string}/interrupt`, {
      token: api.memberToken,
    });
    await db().query("UPDATE chats SET status = 'waiting' WHERE id = $1", [chat.body.id]);
    const again = await api.request("POST", `/api/v1/workspaces/${w.id}/stop`, {
      token: api.memberToken,
    });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({
      status: "stopping",
      latest_build: { transition: "stop", reason: "user" },
    });
  });

  it("a build whose replica stopped renewing it ends failed; the old holder's finish writes nothing", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    const holder = "00000000-0000-4000-8000-000000000002";
    const [b] = await claimBuilds(db(), holder, 1);
    expect(b).toMatchObject({ status: "running", workerId: holder });
    expect(await expireBuilds(db(), 60_000)).toEqual([]); // fresh lease
    const expired = await expireBuilds(db(), 0);
    expect(expired.map((x) => x.id)).toEqual([b!.id]);
    expect(
      await db().transaction((tx) => finishBuild(tx, b!, holder, { status: "succeeded" })),
    ).toBe(false);
    const ws = await api.request("GET", `/api/v1/workspaces/${w.id}`, { token: api.memberToken });
    expect(ws.body).toMatchObject({
      status: "failed",
      latest_build: { status: "failed", error: LEASE_EXPIRED_ERROR },
    });
    // The workspace stays usable: a start may be tried again.
    const start = await api.request("POST", `/api/v1/workspaces/${w.id}/start`, {
      token: api.memberToken,
    });
    expect(start.status).toBe(202);
  });

  it("a build's log is text/plain; another user's workspace is not found", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    await db().query(
      "INSERT INTO workspace_build_logs (build_id, chunk) VALUES ($1, $2), ($1, $3)",
      [w.latest_build.id, "line one\n", "line two\n"],
    );
    const res = await api.app.inject({
      method: "GET",
      url: `/api/v1/workspaces/${w.id}/builds/${w.latest_build.id}/logs`,
      headers: { authorization: `Bearer ${api.memberToken}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain/);
    expect(res.body).toBe("line one\nline two\n");
    const other = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email: "other@example.com", password: "other password", role: "member" },
    });
    expect(other.status).toBe(201);
    const login = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "other@example.com", password: "other password" },
    });
    const r = await api.request("GET", `/api/v1/workspaces/${w.id}/builds`, {
      token: login.body.token as string,
    });
    expect(r.status).toBe(404);
  });

  it("a shared workspace's build logs are its owner's and admins': other members list its builds only", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id, api.adminToken);
    const shared = await api.request("PATCH", `/api/v1/workspaces/${w.id}`, {
      token: api.adminToken,
      body: { shared: true },
    });
    expect(shared.status).toBe(200);
    await db().query("INSERT INTO workspace_build_logs (build_id, chunk) VALUES ($1, $2)", [
      w.latest_build.id,
      "private_ip = 10.0.0.7\n",
    ]);
    const logs = `/api/v1/workspaces/${w.id}/builds/${w.latest_build.id}/logs`;
    const asMember = await api.app.inject({
      method: "GET",
      url: logs,
      headers: { authorization: `Bearer ${api.memberToken}` },
    });
    expect(asMember.statusCode).toBe(403);
    expect(asMember.body).not.toContain("10.0.0.7");
    const builds = await api.request("GET", `/api/v1/workspaces/${w.id}/builds`, {
      token: api.memberToken,
    });
    expect(builds.status).toBe(200);
    expect(builds.body.builds).toMatchObject([{ id: w.latest_build.id }]);
    const asAdmin = await api.app.inject({
      method: "GET",
      url: logs,
      headers: { authorization: `Bearer ${api.adminToken}` },
    });
    expect(asAdmin.statusCode).toBe(200);
    expect(asAdmin.body).toBe("private_ip = 10.0.0.7\n");
  });

  it("a build's output with a NUL byte is kept in its log (the NUL replaced)", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    await appendBuildLog(db(), w.latest_build.id, "before\0after\n");
    const res = await api.app.inject({
      method: "GET",
      url: `/api/v1/workspaces/${w.id}/builds/${w.latest_build.id}/logs`,
      headers: { authorization: `Bearer ${api.memberToken}` },
    });
    expect(res.body).toBe("before\ufffdafter\n");
  });

  it("a template workspace has no agent URL to change", async () => {
    const t = await createTemplate();
    const w = await createWorkspace(t.id);
    const r = await api.request("PATCH", `/api/v1/workspaces/${w.id}`, {
      token: api.memberToken,
      body: { agent_url: "http://127.0.0.1:1" },
    });
    expect(r.status).toBe(400);
    const rename = await api.request("PATCH", `/api/v1/workspaces/${w.id}`, {
      token: api.memberToken,
      body: { name: "renamed" },
    });
    expect(rename.body).toMatchObject({ name: "renamed", status: "starting" });
  });
});

describeDatabases("workspace running time in usage", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("each user's workspace running time is reported per user and per day, split at midnight UTC", async () => {
    const run = (owner: string, from: string, to: string | null) =>
      db().query(
        `INSERT INTO workspace_runs (workspace_id, workspace_name, owner_id, started_at, stopped_at)
         VALUES (gen_random_uuid(), 'w', $1, $2, $3)`,
        [owner, from, to],
      );
    await run(api.memberId, "2026-03-01T23:00:00Z", "2026-03-02T01:30:00Z");
    await run(api.adminId, "2026-03-02T10:00:00Z", "2026-03-02T10:15:00Z");
    const range = "from=2026-03-01&to=2026-03-03";
    const byDay = await api.request("GET", `/api/v1/usage?group_by=day&${range}`, {
      token: api.adminToken,
    });
    expect(byDay.status).toBe(200);
    expect(
      (byDay.body.rows as { day: string; workspace_runtime_ms: number }[]).map((r) => [
        r.day,
        r.workspace_runtime_ms,
      ]),
    ).toEqual([
      ["2026-03-01", 3_600_000],
      ["2026-03-02", 5_400_000 + 900_000],
    ]);
    const byUser = await api.request("GET", `/api/v1/usage?group_by=user&${range}`, {
      token: api.adminToken,
    });
    const users = byUser.body.rows as {
      email: string;
      workspace_runtime_ms: number;
      runtime_ms: number;
    }[];
    expect(users.map((r) => [r.email, r.workspace_runtime_ms, r.runtime_ms]).sort()).toEqual([
      ["admin@example.com", 900_000, 0],
      ["member@example.com", 9_000_000, 0],
    ]);
    // A member sees only their own.
    const mine = await api.request("GET", `/api/v1/usage?group_by=day&${range}`, {
      token: api.memberToken,
    });
    expect(
      (mine.body.rows as { workspace_runtime_ms: number }[]).map((r) => r.workspace_runtime_ms),
    ).toEqual([3_600_000, 5_400_000]);
  });
});
