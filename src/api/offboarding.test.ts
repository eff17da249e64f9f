// Offboarding (issue 11, item 6): disabling a user ends their tokens and sessions at once and
// refuses their sign-ins; a password change needs the current one and ends the other sessions;
// admins list and revoke anyone's tokens; sessions end when idle and API tokens may expire.
// Time is the API's injected clock.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { ManualClock } from "../contract/index.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

const MINUTE_MS = 60_000;
const SESSION_IDLE_MS = 60 * MINUTE_MS;

describeDatabases("offboarding", (db) => {
  let api: TestApi;
  let clock: ManualClock;
  let throttleNow = 1_000_000;
  beforeEach(async () => {
    clock = new ManualClock(Date.parse("2026-01-01T00:00:00Z"));
    throttleNow = 1_000_000;
    api = await startTestApi(db(), {
      clock,
      sessionIdleMs: SESSION_IDLE_MS,
      loginThrottle: {
        maxFailures: 2,
        baseDelayMs: 60_000,
        maxDelayMs: 60_000,
        now: () => throttleNow,
      },
    });
  });
  afterEach(async () => {
    await api.app.close();
  });

  const status = async (token: string, url = "/api/v1/me") =>
    (await api.request("GET", url, { token })).status;
  const login = (email: string, password: string) =>
    api.request("POST", "/api/v1/auth/login", { body: { email, password } });
  const patchUser = (token: string, id: string, body: object) =>
    api.request("PATCH", `/api/v1/users/${id}`, { token, body });
  const newUser = async (email: string, role: string): Promise<{ id: string; token: string }> => {
    const made = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email, password: "a long password", role },
    });
    expect(made.status).toBe(201);
    const l = await login(email, "a long password");
    return { id: made.body.id as string, token: l.body.token as string };
  };

  it("disabling a user ends every token and session at once and refuses sign-in; enabling restores sign-in, not the old tokens", async () => {
    const apiToken = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "ci" },
    });
    const second = await login("member@example.com", "member password");
    for (const t of [api.memberToken, apiToken.body.token as string, second.body.token as string])
      expect(await status(t)).toBe(200);

    const off = await patchUser(api.adminToken, api.memberId, { disabled: true });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ id: api.memberId, disabled: true, role: "member" });
    for (const t of [api.memberToken, apiToken.body.token as string, second.body.token as string])
      expect(await status(t)).toBe(401);
    const refused = await login("member@example.com", "member password");
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("user_disabled");
    // A wrong password says nothing about the account.
    expect((await login("member@example.com", "wrong password")).body.code).toBe(
      "invalid_credentials",
    );
    const users = await api.request("GET", "/api/v1/users", { token: api.adminToken });
    expect(users.body.users).toContainEqual(
      expect.objectContaining({ id: api.memberId, disabled: true }),
    );

    const on = await patchUser(api.adminToken, api.memberId, { disabled: false });
    expect(on.body).toMatchObject({ disabled: false });
    expect(await status(api.memberToken)).toBe(401);
    expect(await status(apiToken.body.token as string)).toBe(401);
    const back = await login("member@example.com", "member password");
    expect(back.status).toBe(200);
    expect(await status(back.body.token as string)).toBe(200);

    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    const entries = audit.body.entries as { action: string; target: string; details: object }[];
    expect(entries.find((e) => e.action === "user.disable")).toMatchObject({
      target: api.memberId,
      details: { tokens_ended: 3 },
    });
    expect(entries.some((e) => e.action === "user.enable")).toBe(true);
  });

  it("who disables whom: admins, an owner only by an owner, never oneself, never the last enabled owner", async () => {
    const admin = await newUser("admin2@example.com", "admin");
    const owner2 = await newUser("owner2@example.com", "member");
    expect((await patchUser(api.memberToken, admin.id, { disabled: true })).status).toBe(403);
    expect((await patchUser(api.adminToken, api.adminId, { disabled: true })).body.code).toBe(
      "cannot_disable_self",
    );
    expect((await patchUser(admin.token, api.adminId, { disabled: true })).status).toBe(403);
    expect((await patchUser(admin.token, owner2.id, { disabled: true })).status).toBe(200);
    expect((await patchUser(admin.token, owner2.id, { disabled: false })).status).toBe(200);
    // owner2 becomes an owner; then an admin may not touch them.
    expect((await patchUser(api.adminToken, owner2.id, { role: "owner" })).status).toBe(200);
    const relogin = await login("owner2@example.com", "a long password");
    expect((await patchUser(admin.token, owner2.id, { disabled: true })).status).toBe(403);
    // The first owner disables the second; then the first is the last enabled owner.
    expect((await patchUser(api.adminToken, owner2.id, { disabled: true })).status).toBe(200);
    expect(await status(relogin.body.token as string)).toBe(401);
    const demote = await patchUser(api.adminToken, api.adminId, { role: "admin" });
    expect(demote.status).toBe(409);
    expect(demote.body.code).toBe("last_owner");
    expect((await patchUser(api.adminToken, admin.id, {})).body.code).toBe("invalid_body");
  });

  it("a password change needs the current password, ends the other sessions and keeps this one and API tokens", async () => {
    const other = await login("member@example.com", "member password");
    const ci = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "ci" },
    });
    const change = (current: string, next: string) =>
      api.request("POST", "/api/v1/me/password", {
        token: api.memberToken,
        body: { current_password: current, new_password: next },
      });
    const wrong = await change("not my password", "a new long password");
    expect(wrong.status).toBe(403);
    expect(wrong.body.code).toBe("wrong_password");
    expect((await change("member password", "short")).body.detail).toContain("new_password");
    expect((await change("member password", "a new long password")).status).toBe(204);
    expect(await status(api.memberToken)).toBe(200);
    expect(await status(ci.body.token as string)).toBe(200);
    expect(await status(other.body.token as string)).toBe(401);
    expect((await login("member@example.com", "member password")).status).toBe(401);
    expect((await login("member@example.com", "a new long password")).status).toBe(200);
    // Guessing the current password is throttled like sign-ins.
    await change("guess 1", "another long password");
    await change("guess 2", "another long password");
    const throttled = await change("guess 3", "another long password");
    expect(throttled.status).toBe(429);
    expect(throttled.body.code).toBe("rate_limited");
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(audit.body.entries).toContainEqual(
      expect.objectContaining({ action: "user.password", details: { sessions_ended: 1 } }),
    );
  });

  it("admins list and revoke any user's tokens; an owner's only by an owner; never a secret", async () => {
    clock.advance(1);
    const ci = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "ci" },
    });
    const list = await api.request("GET", `/api/v1/users/${api.memberId}/tokens`, {
      token: api.adminToken,
    });
    expect(list.status).toBe(200);
    const tokens = list.body.tokens as { id: string; name: string; kind: string }[];
    expect(tokens.map((t) => [t.name, t.kind])).toEqual([
      ["login", "session"],
      ["ci", "api"],
    ]);
    expect(JSON.stringify(list.body)).not.toContain(ci.body.token as string);
    expect(JSON.stringify(list.body)).not.toContain(api.memberToken);
    expect(
      (await api.request("GET", `/api/v1/users/${api.memberId}/tokens`, { token: api.memberToken }))
        .status,
    ).toBe(403);
    const admin = await newUser("admin2@example.com", "admin");
    expect(
      (await api.request("GET", `/api/v1/users/${api.adminId}/tokens`, { token: admin.token }))
        .status,
    ).toBe(403);
    const revoke = (token: string, user: string, id: string) =>
      api.request("DELETE", `/api/v1/users/${user}/tokens/${id}`, { token });
    // A token of another user under this user's path is not found.
    expect((await revoke(admin.token, admin.id, ci.body.id as string)).status).toBe(404);
    expect((await revoke(admin.token, api.memberId, ci.body.id as string)).status).toBe(204);
    expect(await status(ci.body.token as string)).toBe(401);
    expect(await status(api.memberToken)).toBe(200);
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(audit.body.entries).toContainEqual(
      expect.objectContaining({
        action: "token.revoke",
        user_id: admin.id,
        target: ci.body.id,
        details: { user_id: api.memberId },
      }),
    );
  });

  it("a session idle longer than the session idle time ends; use keeps it alive; API tokens do not idle", async () => {
    const ci = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "ci" },
    });
    clock.advance(SESSION_IDLE_MS - MINUTE_MS);
    expect(await status(api.memberToken)).toBe(200);
    clock.advance(SESSION_IDLE_MS - MINUTE_MS);
    expect(await status(api.memberToken)).toBe(200);
    clock.advance(SESSION_IDLE_MS);
    const ended = await api.request("GET", "/api/v1/me", { token: api.memberToken });
    expect(ended.status).toBe(401);
    expect(ended.body.code).toBe("session_expired");
    expect(await status(ci.body.token as string)).toBe(200);
    const left = await db().query("SELECT name FROM api_tokens WHERE user_id = $1", [api.memberId]);
    expect(left.rows).toEqual([{ name: "ci" }]);
  });

  it("an API token with an expiry stops at it with token_expired", async () => {
    const made = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "short", expires_in_ms: 10 * MINUTE_MS },
    });
    expect(made.status).toBe(201);
    expect(made.body.expires_at).toBe(new Date(clock.now() + 10 * MINUTE_MS).toISOString());
    const at = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "until", expires_at: new Date(clock.now() + 20 * MINUTE_MS).toISOString() },
    });
    expect(at.status).toBe(201);
    const listed = await api.request("GET", "/api/v1/tokens", { token: api.memberToken });
    expect(listed.body.tokens).toContainEqual(
      expect.objectContaining({ name: "short", expires_at: made.body.expires_at }),
    );
    expect(await status(made.body.token as string)).toBe(200);
    clock.advance(10 * MINUTE_MS);
    const expired = await api.request("GET", "/api/v1/me", { token: made.body.token as string });
    expect(expired.status).toBe(401);
    expect(expired.body.code).toBe("token_expired");
    expect(await status(at.body.token as string)).toBe(200);
    clock.advance(10 * MINUTE_MS);
    expect(await status(at.body.token as string)).toBe(401);
    for (const body of [
      { name: "past", expires_at: new Date(clock.now() - 1).toISOString() },
      { name: "both", expires_in_ms: 1000, expires_at: new Date(clock.now() + 5000).toISOString() },
      { name: "zero", expires_in_ms: 0 },
    ]) {
      const r = await api.request("POST", "/api/v1/tokens", { token: api.memberToken, body });
      expect(r.status, body.name).toBe(400);
      expect(r.body.detail).toMatch(/expires_/);
    }
  });
});
