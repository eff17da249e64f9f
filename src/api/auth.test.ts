import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { createApi } from "./app.ts";
import { hashPassword, hashToken, verifyPassword } from "./credentials.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

describe("passwords and tokens at rest", () => {
  it("a password hash is scrypt with its parameters and a random salt, and verifies only its password", async () => {
    const a = await hashPassword("correct horse");
    const b = await hashPassword("correct horse");
    expect(a).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword("correct horse", a)).toBe(true);
    expect(await verifyPassword("correct horsE", a)).toBe(false);
    expect(await verifyPassword("correct horse", "scrypt$1$1$1$x$y")).toBe(false);
    expect(await verifyPassword("correct horse", "plain")).toBe(false);
  });

  it("a token is stored as the SHA-256 hex of the secret", () => {
    expect(hashToken("tether_x")).toMatch(/^[0-9a-f]{64}$/);
  });
});

describeDatabases("authentication", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("the first user is the owner with a token, and a second first user is refused with 409", async () => {
    const me = await api.request("GET", "/api/v1/me", { token: api.adminToken });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: "admin@example.com", name: "Ada", role: "owner" });
    expect(me.body).not.toHaveProperty("password_hash");
    expect(api.adminToken).toMatch(/^tether_[A-Za-z0-9_-]{43}$/);
    const again = await api.request("POST", "/api/v1/users/first", {
      body: { email: "other@example.com", password: "another password" },
    });
    expect(again.status).toBe(409);
    expect(again.body.message).toEqual(expect.any(String));
    // The UI asks, without a token, whether to show setup or sign-in.
    const setup = await api.request("GET", "/api/v1/setup");
    expect(setup).toMatchObject({ status: 200, body: { first_user_needed: false } });
    const row = await db().query(
      "SELECT password_hash FROM users WHERE email = 'admin@example.com'",
    );
    expect(row.rows[0]!.password_hash).toMatch(/^scrypt\$/);
  });

  it("login answers a new token for the right password and one 401 message for a wrong email or password", async () => {
    const ok = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "ADMIN@example.com", password: "correct horse" },
    });
    expect(ok.status).toBe(200);
    const token = ok.body.token as string;
    expect((await api.request("GET", "/api/v1/me", { token })).status).toBe(200);
    const badPassword = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "admin@example.com", password: "wrong horse" },
    });
    const badEmail = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "nobody@example.com", password: "correct horse" },
    });
    expect(badPassword.status).toBe(401);
    expect(badEmail.status).toBe(401);
    expect(badPassword.body).toEqual(badEmail.body);
    const names = await api.request("GET", "/api/v1/tokens", { token });
    expect((names.body.tokens as { name: string }[]).map((t) => t.name)).toContain("login");
  });

  it("every route but health and the first user needs a valid bearer token", async () => {
    expect(await api.request("GET", "/api/v1/health")).toMatchObject({
      status: 200,
      body: { status: "ok" },
    });
    for (const [method, url] of [
      ["GET", "/api/v1/me"],
      ["GET", "/api/v1/chats"],
      ["POST", "/api/v1/tokens"],
      ["GET", "/api/v1/models"],
    ] as const) {
      const none = await api.request(method, url);
      expect(none.status, `${method} ${url}`).toBe(401);
      expect(none.body.message).toEqual(expect.any(String));
      expect((await api.request(method, url, { token: "tether_wrong" })).status).toBe(401);
    }
  });

  it("a created token works, is listed without its secret, and stops working at once when deleted", async () => {
    const created = await api.request("POST", "/api/v1/tokens", {
      token: api.memberToken,
      body: { name: "ci" },
    });
    expect(created.status).toBe(201);
    const { id, token } = created.body as { id: string; token: string };
    expect(token).toMatch(/^tether_/);
    expect((await api.request("GET", "/api/v1/me", { token })).body.email).toBe(
      "member@example.com",
    );
    const list = await api.request("GET", "/api/v1/tokens", { token });
    const listed = (list.body.tokens as Record<string, unknown>[]).find((t) => t.id === id);
    expect(listed).toMatchObject({ id, name: "ci" });
    expect(JSON.stringify(list.body)).not.toContain(token);
    expect(JSON.stringify(list.body)).not.toContain(hashToken(token));
    const stored = await db().query("SELECT token_hash FROM api_tokens WHERE id = $1", [id]);
    expect(stored.rows[0]!.token_hash).toBe(hashToken(token));

    // Another user's token is not found, and stays.
    expect(
      (await api.request("DELETE", `/api/v1/tokens/${id}`, { token: api.adminToken })).status,
    ).toBe(404);
    const deleted = await api.request("DELETE", `/api/v1/tokens/${id}`, { token });
    expect(deleted.status).toBe(204);
    expect((await api.request("GET", "/api/v1/me", { token })).status).toBe(401);
    expect((await api.request("GET", "/api/v1/me", { token: api.memberToken })).status).toBe(200);
  });

  it("a member cannot create or list users, or create models (403); an admin can", async () => {
    const user = { email: "new@example.com", password: "new password", role: "member" };
    expect(
      (await api.request("POST", "/api/v1/users", { token: api.memberToken, body: user })).status,
    ).toBe(403);
    expect((await api.request("GET", "/api/v1/users", { token: api.memberToken })).status).toBe(
      403,
    );
    const model = { provider: "demo", model: "demo" };
    expect(
      (await api.request("POST", "/api/v1/models", { token: api.memberToken, body: model })).status,
    ).toBe(403);
    const made = await api.request("POST", "/api/v1/users", { token: api.adminToken, body: user });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ email: "new@example.com", role: "member" });
    expect(made.body).not.toHaveProperty("password_hash");
    const dup = await api.request("POST", "/api/v1/users", { token: api.adminToken, body: user });
    expect(dup.status).toBe(409);
    const users = await api.request("GET", "/api/v1/users", { token: api.adminToken });
    expect((users.body.users as unknown[]).length).toBe(3);
    expect(JSON.stringify(users.body)).not.toContain("scrypt");
  });

  it("bad input is a 400 naming the field", async () => {
    const short = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email: "x@example.com", password: "short", role: "member" },
    });
    expect(short.status).toBe(400);
    expect(short.body.detail).toContain("password");
    const role = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email: "x@example.com", password: "long enough", role: "superuser" },
    });
    expect(role.status).toBe(400);
    expect(role.body.detail).toContain("role");
    const email = await api.request("POST", "/api/v1/auth/login", {
      body: { email: "nope", password: "x" },
    });
    expect(email.status).toBe(400);
    expect(email.body.detail).toContain("email");
    const badJson = await api.app.inject({
      method: "POST",
      url: "/api/v1/auth/login",
      headers: { "content-type": "application/json" },
      payload: "{not json",
    });
    expect(badJson.statusCode).toBe(400);
    expect(Object.keys(badJson.json<Record<string, unknown>>())).toEqual(["message", "code"]);
    const tokenId = await api.request("DELETE", "/api/v1/tokens/not-a-uuid", {
      token: api.adminToken,
    });
    expect(tokenId.status).toBe(400);
    expect(tokenId.body.detail).toContain("id");
  });
});

describeDatabases("login throttling across replicas", (db) => {
  let now = 1_000_000;
  const loginThrottle = { maxFailures: 3, baseDelayMs: 2_000, maxDelayMs: 60_000, now: () => now };
  let one: TestApi;
  let two: FastifyInstance | undefined;
  beforeEach(async () => {
    now = 1_000_000;
    one = await startTestApi(db(), { loginThrottle });
    // startTestApi would make the first user again: the second replica is a bare API.
    two = await createApi({ db: db(), buffer: new StreamBuffer(), loginThrottle });
  });
  afterEach(async () => {
    await one.app.close();
    await two?.close();
  });

  const loginOn = async (
    replica: "one" | "two",
    email: string,
    password: string,
  ): Promise<{ status: number; retryAfter: unknown }> => {
    if (replica === "one") {
      const a = await one.request("POST", "/api/v1/auth/login", { body: { email, password } });
      return { status: a.status, retryAfter: a.headers["retry-after"] };
    }
    const a = await two!.inject({
      method: "POST",
      url: "/api/v1/auth/login",
      payload: { email, password },
    });
    return { status: a.statusCode, retryAfter: a.headers["retry-after"] };
  };

  it("failures on one replica throttle logins on another, and a success on either clears them", async () => {
    expect((await loginOn("one", "member@example.com", "wrong")).status).toBe(401);
    expect((await loginOn("two", "member@example.com", "wrong")).status).toBe(401);
    expect((await loginOn("one", "member@example.com", "wrong")).status).toBe(401);
    // Three failures in all, though neither replica saw three.
    for (const replica of ["one", "two"] as const) {
      expect(await loginOn(replica, "member@example.com", "member password")).toEqual({
        status: 429,
        retryAfter: "2",
      });
    }
    now += 2_000;
    expect((await loginOn("two", "member@example.com", "member password")).status).toBe(200);
    // Had the success on two not cleared the count, this fourth failure would make one wait.
    expect((await loginOn("one", "member@example.com", "wrong")).status).toBe(401);
    expect((await loginOn("two", "member@example.com", "member password")).status).toBe(200);
  });

  it("a burst of concurrent guesses on two replicas is counted one by one: only maxFailures get checked", async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        loginOn(i % 2 === 0 ? "one" : "two", "member@example.com", `guess ${i}`),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(9);
  });

  it("a key idle past the longest delay starts again from one failure, and its row goes", async () => {
    for (let i = 0; i < 3; i++)
      expect((await loginOn("one", "member@example.com", "wrong")).status).toBe(401);
    const rows = async () =>
      (
        await db().query<{ key: string; count: number }>(
          "SELECT key, count FROM login_failures ORDER BY key",
        )
      ).rows;
    expect(await rows()).toEqual([
      { key: "email:member@example.com", count: 3 },
      { key: "ip:127.0.0.1", count: 3 },
    ]);
    now += 60_001;
    expect((await loginOn("two", "nobody@example.com", "wrong")).status).toBe(401);
    expect(await rows()).toEqual([
      { key: "email:nobody@example.com", count: 1 },
      { key: "ip:127.0.0.1", count: 1 },
    ]);
    expect((await loginOn("one", "member@example.com", "member password")).status).toBe(200);
  });
});
