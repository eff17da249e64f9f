// Accounts and governance (issue 6): role rules, model governance, sessions and the CSRF
// rule, login throttling, token revocation and the audit log. Every test ends by checking
// that no answer it got carries a model key or an agent token.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { startTestAgent, type TestAgent } from "../../test/support/agent.ts";
import { openSse, startTestApi, type TestApi } from "./test-support.ts";

const MODEL_KEY = "sk-model-key-never-answered";
const AGENT_TOKEN = "agent-token-never-answered";

describeDatabases("accounts", (db) => {
  let api: TestApi;
  let now = 1_000_000;
  beforeEach(async () => {
    now = 1_000_000;
    // Members register agents on loopback here; the address rule is agent-urls.test.ts's.
    api = await startTestApi(db(), {
      memberAgentAddresses: () => true,
      loginThrottle: { maxFailures: 3, baseDelayMs: 2_000, maxDelayMs: 60_000, now: () => now },
      healthTimeoutMs: 1_000,
      trustProxy: true,
    });
  });
  afterEach(async () => {
    await api.app.close();
    for (const a of api.answers) {
      expect(a).not.toContain(MODEL_KEY);
      expect(a).not.toContain(AGENT_TOKEN);
    }
  });

  /** A new user made by `by`, logged in: its ID and a token. */
  const newUser = async (
    by: string,
    email: string,
    role: "owner" | "admin" | "member",
  ): Promise<{ id: string; token: string }> => {
    const made = await api.request("POST", "/api/v1/users", {
      token: by,
      body: { email, password: "a long password", role },
    });
    expect(made.status).toBe(201);
    const login = await api.request("POST", "/api/v1/auth/login", {
      body: { email, password: "a long password" },
    });
    expect(login.status).toBe(200);
    return { id: made.body.id as string, token: login.body.token as string };
  };
  const setRole = async (token: string, id: string, role: string): Promise<number> =>
    (await api.request("PATCH", `/api/v1/users/${id}`, { token, body: { role } })).status;

  it("roles: the owner and admins manage users; an admin cannot make or unmake an owner; the last owner stays", async () => {
    const ownerToken = api.adminToken; // the first user
    const ownerId = api.adminId;
    const me = await api.request("GET", "/api/v1/me", { token: ownerToken });
    expect(me.body.role).toBe("owner");
    const admin = await newUser(ownerToken, "admin2@example.com", "admin");
    // An admin creates members and admins, never owners.
    const m2 = await newUser(admin.token, "m2@example.com", "member");
    const ownerByAdmin = await api.request("POST", "/api/v1/users", {
      token: admin.token,
      body: { email: "o2@example.com", password: "a long password", role: "owner" },
    });
    expect(ownerByAdmin.status).toBe(403);
    expect(await setRole(admin.token, m2.id, "admin")).toBe(200);
    expect(await setRole(admin.token, m2.id, "member")).toBe(200);
    expect(await setRole(admin.token, m2.id, "owner")).toBe(403);
    expect(await setRole(admin.token, ownerId, "member")).toBe(403);
    // A member changes nobody, not even themself.
    expect(await setRole(api.memberToken, api.memberId, "admin")).toBe(403);
    expect(await setRole(api.memberToken, m2.id, "admin")).toBe(403);
    expect((await api.request("GET", "/api/v1/users", { token: api.memberToken })).status).toBe(
      403,
    );
    // The last owner cannot be demoted, even by themself; with a second owner they can.
    expect(await setRole(ownerToken, ownerId, "admin")).toBe(409);
    expect(await setRole(ownerToken, admin.id, "owner")).toBe(200);
    expect(await setRole(ownerToken, ownerId, "admin")).toBe(200);
    expect(await setRole(admin.token, ownerId, "owner")).toBe(200); // admin is an owner now
    expect(await setRole(admin.token, "00000000-0000-4000-8000-000000000000", "admin")).toBe(404);
    const bad = await api.request("PATCH", `/api/v1/users/${m2.id}`, {
      token: ownerToken,
      body: { role: "root" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toContain("role");
    const roles = await db().query<{ email: string; role: string }>(
      "SELECT email, role FROM users ORDER BY email",
    );
    expect(roles.rows).toEqual([
      { email: "admin2@example.com", role: "owner" },
      { email: "admin@example.com", role: "owner" },
      { email: "m2@example.com", role: "member" },
      { email: "member@example.com", role: "member" },
    ]);
    const second = await api.request("POST", "/api/v1/users/first", {
      body: { email: "late@example.com", password: "a long password" },
    });
    expect(second.status).toBe(409);
  });

  it("chats: a member sees only their own; an admin reads everyone's but acts only on their own", async () => {
    const admin = await newUser(api.adminToken, "admin2@example.com", "admin");
    const other = await newUser(api.adminToken, "m2@example.com", "member");
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: "hello" },
    });
    expect(chat.status).toBe(201);
    const id = chat.body.id as string;
    const msgs = await api.request("GET", `/api/v1/chats/${id}/messages`, {
      token: api.memberToken,
    });
    const messageId = (msgs.body.messages as { id: string }[])[0]!.id;
    const reads = [
      `/api/v1/chats/${id}`,
      `/api/v1/chats/${id}/messages`,
      `/api/v1/chats/${id}/usage`,
    ];
    for (const url of reads) {
      expect((await api.request("GET", url, { token: other.token })).status).toBe(404);
      expect((await api.request("GET", url, { token: admin.token })).status).toBe(200);
      expect((await api.request("GET", url, { token: api.adminToken })).status).toBe(200);
    }
    const acts: [string, string, object][] = [
      ["POST", `/api/v1/chats/${id}/messages`, { text: "hi" }],
      ["PATCH", `/api/v1/chats/${id}/messages/${messageId}`, { text: "edited" }],
      ["POST", `/api/v1/chats/${id}/interrupt`, {}],
    ];
    for (const [method, url, body] of acts) {
      for (const token of [other.token, admin.token, api.adminToken]) {
        expect((await api.request(method, url, { token, body })).status).toBe(404);
      }
    }
    // The list is the caller's own, for admins too.
    const list = await api.request("GET", "/api/v1/chats", { token: admin.token });
    expect(list.body.chats).toEqual([]);
    // The owner acts, and each action is audited with the acting user.
    expect(
      (await api.request("POST", `/api/v1/chats/${id}/interrupt`, { token: api.memberToken }))
        .status,
    ).toBe(202);
    const edit = await api.request("PATCH", `/api/v1/chats/${id}/messages/${messageId}`, {
      token: api.memberToken,
      body: { text: "edited" },
    });
    expect(edit.status).toBe(200);
    const audit = await api.request("GET", "/api/v1/audit", { token: admin.token });
    const chatEntries = (
      audit.body.entries as { action: string; user_id: string; target: string }[]
    )
      .filter((e) => e.action.startsWith("chat.") && e.action !== "chat.staff_read")
      .map((e) => [e.action, e.user_id, e.target]);
    expect(chatEntries).toEqual([
      ["chat.edit", api.memberId, id],
      ["chat.interrupt", api.memberId, id],
      ["chat.create", api.memberId, id],
    ]);
    // The admins' reads of the member's chat, one entry per read (audit-gaps.test.ts).
    const staffReads = (audit.body.entries as { action: string }[]).filter(
      (e) => e.action === "chat.staff_read",
    );
    expect(staffReads).toHaveLength(reads.length * 2);
  });

  it("streams: an admin reads a member's chat stream; another member gets 404", async () => {
    const other = await newUser(api.adminToken, "m2@example.com", "member");
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: "hello" },
    });
    const base = await api.app.listen({ host: "127.0.0.1", port: 0 });
    const path = `/api/v1/chats/${chat.body.id as string}/stream`;
    const admin = await openSse(base, path, api.adminToken);
    try {
      expect(admin.status).toBe(200);
      await admin.until((events) => events.some((e) => e.event === "message"));
    } finally {
      admin.close();
    }
    const denied = await openSse(base, path, other.token);
    denied.close();
    expect(denied.status).toBe(404);
  });

  it("models: admins configure them, keys are never answered, members list and pick only enabled ones", async () => {
    const body = {
      provider: "openai",
      model: "gpt-x",
      api_key: MODEL_KEY,
      input_price_per_mtok_micros: 3_000_000,
      output_price_per_mtok_micros: 15_000_000,
    };
    expect(
      (await api.request("POST", "/api/v1/models", { token: api.memberToken, body })).status,
    ).toBe(403);
    const made = await api.request("POST", "/api/v1/models", { token: api.adminToken, body });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      enabled: true,
      has_api_key: true,
      input_price_per_mtok_micros: 3_000_000,
      output_price_per_mtok_micros: 15_000_000,
    });
    const id = made.body.id as string;
    const url = `/api/v1/models/${id}`;
    expect(
      (await api.request("PATCH", url, { token: api.memberToken, body: { enabled: false } }))
        .status,
    ).toBe(403);
    expect((await api.request("DELETE", url, { token: api.memberToken })).status).toBe(403);
    const ids = async (token: string): Promise<string[]> =>
      ((await api.request("GET", "/api/v1/models", { token })).body.models as { id: string }[]).map(
        (m) => m.id,
      );
    expect(await ids(api.memberToken)).toEqual([id]);
    const picked = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { model_id: id },
    });
    expect(picked.status).toBe(201);
    expect(picked.body.model_id).toBe(id);

    const off = await api.request("PATCH", url, {
      token: api.adminToken,
      body: { enabled: false, output_price_per_mtok_micros: 10_000_000, api_key: MODEL_KEY + "2" },
    });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ enabled: false, output_price_per_mtok_micros: 10_000_000 });
    expect(await ids(api.memberToken)).toEqual([]);
    expect(await ids(api.adminToken)).toEqual([id]);
    const refused = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { model_id: id },
    });
    expect(refused.status).toBe(404);
    expect(refused.body.detail).toBe("model_id");
    const badPrice = await api.request("PATCH", url, {
      token: api.adminToken,
      body: { input_price_per_mtok_micros: 1.5 },
    });
    expect(badPrice.status).toBe(400);
    expect(badPrice.body.detail).toContain("input_price_per_mtok_micros");
    const keyed = await api.request("PATCH", url, {
      token: api.adminToken,
      body: { api_key: null },
    });
    expect(keyed.body.has_api_key).toBe(false);
    expect((await api.request("DELETE", url, { token: api.adminToken })).status).toBe(204);
    expect((await api.request("DELETE", url, { token: api.adminToken })).status).toBe(404);
    // The audit log has every change, the key only as "set"/"cleared".
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    const entries = (
      audit.body.entries as { action: string; details: Record<string, unknown> }[]
    ).filter((e) => e.action.startsWith("model."));
    expect(entries.map((e) => [e.action, e.details.api_key])).toEqual([
      ["model.delete", undefined],
      ["model.update", "cleared"],
      ["model.update", "set"],
      ["model.create", "set"],
    ]);
    const stored = await db().query(
      "SELECT count(*)::int AS n FROM audit_log WHERE details::text LIKE $1",
      [`%${MODEL_KEY}%`],
    );
    expect(stored.rows[0]!.n).toBe(0);
  });

  it("a browser session: login sets an HttpOnly cookie the API accepts; changes need the CSRF header from our origin; logout ends it", async () => {
    const login = await api.app.inject({
      method: "POST",
      url: "/api/v1/auth/login",
      payload: { email: "member@example.com", password: "member password" },
    });
    expect(login.statusCode).toBe(200);
    const setCookie = String(login.headers["set-cookie"]);
    expect(setCookie).toMatch(
      /^tether_session=tether_[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict$/,
    );
    const cookie = setCookie.split(";")[0]!;
    expect(cookie).toBe(`tether_session=${login.json<{ token: string }>().token}`);
    const headers = { cookie };
    expect((await api.request("GET", "/api/v1/me", { headers })).body.email).toBe(
      "member@example.com",
    );
    const body = { name: "from the browser" };
    const noHeader = await api.request("POST", "/api/v1/tokens", { headers, body });
    expect(noHeader.status).toBe(403);
    const crossSite = await api.request("POST", "/api/v1/tokens", {
      headers: { ...headers, "x-tether-csrf": "1", origin: "https://evil.example" },
      body,
    });
    expect(crossSite.status).toBe(403);
    const sameSite = await api.request("POST", "/api/v1/tokens", {
      headers: {
        ...headers,
        "x-tether-csrf": "1",
        origin: "http://localhost:80",
        host: "localhost:80",
      },
      body,
    });
    expect(sameSite.status).toBe(201);
    const ok = await api.request("POST", "/api/v1/tokens", {
      headers: { ...headers, "x-tether-csrf": "1" },
      body,
    });
    expect(ok.status).toBe(201);
    // A bearer request needs no CSRF header (a browser never sends one by itself).
    expect(
      (await api.request("POST", "/api/v1/tokens", { token: api.memberToken, body })).status,
    ).toBe(201);
    const out = await api.request("POST", "/api/v1/auth/logout", {
      headers: { ...headers, "x-tether-csrf": "1" },
    });
    expect(out.status).toBe(204);
    expect(String(out.headers["set-cookie"])).toContain("Max-Age=0");
    expect((await api.request("GET", "/api/v1/me", { headers })).status).toBe(401);
    // Over https the cookie is Secure.
    const https = await api.app.inject({
      method: "POST",
      url: "/api/v1/auth/login",
      headers: { "x-forwarded-proto": "https" },
      payload: { email: "member@example.com", password: "member password" },
    });
    expect(https.statusCode).toBe(200);
    expect(String(https.headers["set-cookie"])).toMatch(/; Secure$/);
  });

  it("a revoked token and a deleted session fail their very next request", async () => {
    const made = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "cli" },
    });
    const token = made.body.token as string;
    expect((await api.request("GET", "/api/v1/me", { token })).status).toBe(200);
    const list = await api.request("GET", "/api/v1/tokens", { token: api.memberToken });
    const tokens = list.body.tokens as { id: string; kind: string; current: boolean }[];
    const session = tokens.find((t) => t.kind === "session")!;
    expect(session).toBeDefined();
    // The list says which token it was asked with: the member's login (a session).
    expect(tokens.filter((t) => t.current).map((t) => t.id)).toEqual([session.id]);
    expect(
      (
        await api.request("DELETE", `/api/v1/tokens/${made.body.id as string}`, {
          token: api.memberToken,
        })
      ).status,
    ).toBe(204);
    expect((await api.request("GET", "/api/v1/me", { token })).status).toBe(401);
    // The member's login token is a session: revoking it ends the cookie too.
    const cookie = `tether_session=${api.memberToken}`;
    expect((await api.request("GET", "/api/v1/me", { headers: { cookie } })).status).toBe(200);
    expect(
      (
        await api.request("DELETE", `/api/v1/tokens/${session.id}`, {
          headers: { cookie, "x-tether-csrf": "1" },
        })
      ).status,
    ).toBe(204);
    expect((await api.request("GET", "/api/v1/me", { headers: { cookie } })).status).toBe(401);
    expect((await api.request("GET", "/api/v1/me", { token: api.memberToken })).status).toBe(401);
  });

  it("logins are throttled per email and per address after repeated failures, with a growing Retry-After", async () => {
    const login = (email: string, password: string) =>
      api.request("POST", "/api/v1/auth/login", { body: { email, password } });
    for (let i = 0; i < 3; i++)
      expect((await login("member@example.com", "wrong")).status).toBe(401);
    const throttled = await login("member@example.com", "member password");
    expect(throttled.status).toBe(429);
    expect(throttled.headers["retry-after"]).toBe("2");
    // The address is throttled too: another email from it waits.
    expect((await login("admin@example.com", "correct horse")).status).toBe(429);
    now += 2_000;
    expect((await login("member@example.com", "wrong")).status).toBe(401);
    const longer = await login("member@example.com", "member password");
    expect(longer.status).toBe(429);
    expect(longer.headers["retry-after"]).toBe("4");
    now += 4_000;
    expect((await login("member@example.com", "member password")).status).toBe(200);
    // A success clears the count.
    expect((await login("member@example.com", "wrong")).status).toBe(401);
    expect((await login("member@example.com", "member password")).status).toBe(200);
    const audit = await api.request("GET", "/api/v1/audit?limit=100", { token: api.adminToken });
    const actions = (audit.body.entries as { action: string }[]).map((e) => e.action);
    expect(actions.filter((a) => a === "auth.login_failed")).toHaveLength(5);
  });

  it("the audit log: admins and owners only, newest first, paged, with who, what, when and where", async () => {
    const headers = { "user-agent": "audit-test/1.0" };
    await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "t" },
      headers,
    });
    await api.request("POST", "/api/v1/auth/login", {
      body: { email: "member@example.com", password: "nope nope" },
      headers,
    });
    const ws = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "w", agent_url: "http://127.0.0.1:1", agent_token: AGENT_TOKEN },
    });
    expect((await api.request("GET", "/api/v1/audit", { token: api.memberToken })).status).toBe(
      403,
    );
    const all = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(all.status).toBe(200);
    const entries = all.body.entries as Record<string, unknown>[];
    expect(entries.map((e) => e.action)).toEqual([
      "workspace.create",
      "auth.login_failed",
      "token.create",
      "auth.login", // the member's login in startTestApi
      "user.create",
      "user.create", // the first user
    ]);
    expect(entries[0]).toMatchObject({
      user_id: api.memberId,
      target: ws.body.id,
      ip: "127.0.0.1",
    });
    expect(entries[1]).toMatchObject({
      user_id: api.memberId,
      user_agent: "audit-test/1.0",
      details: { email: "member@example.com" },
    });
    expect(Date.parse(entries[0]!.created_at as string)).toBeGreaterThan(0);
    const page1 = await api.request("GET", "/api/v1/audit?limit=2", { token: api.adminToken });
    const p1 = page1.body.entries as { id: string }[];
    expect(p1.map((e) => e.id)).toEqual(entries.slice(0, 2).map((e) => e.id));
    const page2 = await api.request("GET", `/api/v1/audit?limit=2&before=${p1[1]!.id}`, {
      token: api.adminToken,
    });
    expect((page2.body.entries as { id: string }[]).map((e) => e.id)).toEqual(
      entries.slice(2, 4).map((e) => e.id),
    );
    expect(
      (await api.request("GET", "/api/v1/audit?limit=0", { token: api.adminToken })).status,
    ).toBe(400);
  });
});

describeDatabases("workspaces: ownership, sharing and health", (db) => {
  let api: TestApi;
  let agent: TestAgent;
  beforeEach(async () => {
    api = await startTestApi(db(), { healthTimeoutMs: 1_000, memberAgentAddresses: () => true });
    agent = await startTestAgent({ token: AGENT_TOKEN });
  });
  afterEach(async () => {
    await api.app.close();
    await agent.close();
    for (const a of api.answers) expect(a).not.toContain(AGENT_TOKEN);
  });

  it("health comes from the agent; an admin shares a workspace and members may then use it", async () => {
    const made = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "team", agent_url: agent.url, agent_token: AGENT_TOKEN },
    });
    expect(made.status).toBe(201);
    const id = made.body.id as string;
    const one = await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.adminToken });
    expect(one.body.health).toMatchObject({
      reachable: true,
      version: expect.any(String) as string,
    });
    expect((one.body.health as { uptime_ms: number }).uptime_ms).toBeGreaterThanOrEqual(0);
    const dead = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "dead", agent_url: "http://127.0.0.1:1" },
    });
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    expect(list.body.workspaces).toEqual([
      expect.objectContaining({
        id: dead.body.id,
        health: expect.objectContaining({ reachable: false }) as object,
      }),
    ]);
    // Not shared: the member neither sees nor uses it.
    expect(
      (await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.memberToken })).status,
    ).toBe(404);
    const chatOn = () =>
      api.request("POST", "/api/v1/chats", { token: api.memberToken, body: { workspace_id: id } });
    expect((await chatOn()).status).toBe(404);
    // Only an admin or owner shares.
    expect(
      (
        await api.request("PATCH", `/api/v1/workspaces/${dead.body.id as string}`, {
          token: api.memberToken,
          body: { shared: true },
        })
      ).status,
    ).toBe(403);
    const shared = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.adminToken,
      body: { shared: true },
    });
    expect(shared.status).toBe(200);
    expect(shared.body.shared).toBe(true);
    expect((await chatOn()).status).toBe(201);
    expect(
      (
        await api.request("PATCH", `/api/v1/workspaces/${id}`, {
          token: api.memberToken,
          body: { name: "mine now" },
        })
      ).status,
    ).toBe(403);
    // Its owner renames their own.
    const renamed = await api.request("PATCH", `/api/v1/workspaces/${dead.body.id as string}`, {
      token: api.memberToken,
      body: { name: "still dead" },
    });
    expect(renamed.body.name).toBe("still dead");
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    const ws = (
      audit.body.entries as { action: string; details: Record<string, unknown> }[]
    ).filter((e) => e.action.startsWith("workspace."));
    expect(ws.map((e) => e.action)).toEqual([
      "workspace.update",
      "workspace.update",
      "workspace.create",
      "workspace.create",
    ]);
    const logged = await db().query(
      "SELECT count(*)::int AS n FROM audit_log WHERE details::text LIKE $1",
      [`%${AGENT_TOKEN}%`],
    );
    expect(logged.rows[0]!.n).toBe(0);
  });
});
