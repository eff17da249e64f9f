// Text the database cannot store (issue 11, item 12): a NUL or an unpaired surrogate in any
// string the API takes — a body field at any depth, an object key, a query or path parameter —
// is a 400 naming the field with a stable code, never a 500 from the database; and the headers
// the API reads (bearer token, session cookie, user agent, forwarded address) never make a 500.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

/** A NUL, a high surrogate alone, a low surrogate alone. */
const UNSTORABLE = ["a\u0000b", "a\ud800b", "\udfff"];

describeDatabases("API input", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db(), { trustProxy: true, memberAgentAddresses: () => true });
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("a NUL or unpaired surrogate in any body field is a 400 naming the field, nothing stored", async () => {
    const ws = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "w", agent_url: "http://127.0.0.1:1" },
    });
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: ws.body.id },
    });
    const chatId = chat.body.id as string;
    const counts = async () =>
      (
        await db().query(
          `SELECT (SELECT count(*) FROM api_tokens) AS t, (SELECT count(*) FROM users) AS u,
             (SELECT count(*) FROM chats) AS c, (SELECT count(*) FROM chat_messages) AS m,
             (SELECT count(*) FROM workspaces) AS w, (SELECT count(*) FROM model_configs) AS mc`,
        )
      ).rows[0];
    const before = await counts();
    for (const bad of UNSTORABLE) {
      const cases: [string, string, string, Record<string, unknown>, string][] = [
        ["member", "POST", "/api/v1/tokens", { name: bad }, "name"],
        [
          "admin",
          "POST",
          "/api/v1/users",
          {
            email: "x@example.com",
            password: "a long password",
            name: bad,
            role: "member",
          },
          "name",
        ],
        [
          "admin",
          "POST",
          "/api/v1/users",
          {
            email: "x@example.com",
            password: `long password ${bad}`,
            role: "member",
          },
          "password",
        ],
        [
          "none",
          "POST",
          "/api/v1/auth/login",
          { email: "x@example.com", password: bad },
          "password",
        ],
        [
          "none",
          "POST",
          "/api/v1/auth/login",
          { email: `${bad}@example.com`, password: "p" },
          "email",
        ],
        ["member", "POST", "/api/v1/chats", { title: bad }, "title"],
        ["member", "POST", "/api/v1/chats", { message: bad }, "message"],
        ["member", "POST", `/api/v1/chats/${chatId}/messages`, { text: bad }, "text"],
        [
          "member",
          "POST",
          "/api/v1/workspaces",
          { name: bad, agent_url: "http://127.0.0.1:1" },
          "name",
        ],
        [
          "member",
          "POST",
          "/api/v1/workspaces",
          {
            name: "n",
            agent_url: "http://127.0.0.1:1",
            agent_token: bad,
          },
          "agent_token",
        ],
        ["member", "PATCH", `/api/v1/workspaces/${ws.body.id as string}`, { name: bad }, "name"],
        ["admin", "POST", "/api/v1/models", { provider: "demo", model: bad }, "model"],
        [
          "admin",
          "POST",
          "/api/v1/models",
          { provider: "demo", model: "m", api_key: bad },
          "api_key",
        ],
        // Deep inside, and in a key: the whole body is checked, not only the schema's fields.
        [
          "member",
          "POST",
          "/api/v1/tokens",
          { name: "t", extra: { list: ["ok", bad] } },
          "extra.list.1",
        ],
        ["member", "POST", "/api/v1/tokens", { name: "t", [bad]: 1 }, bad],
      ];
      for (const [who, method, url, body, field] of cases) {
        const token =
          who === "admin" ? api.adminToken : who === "member" ? api.memberToken : undefined;
        const r = await api.request(method, url, { ...(token && { token }), body });
        expect(r.status, `${method} ${url} ${JSON.stringify(body)}`).toBe(400);
        expect(r.body.code).toBe("invalid_body");
        expect(r.body.detail).toContain(`${field}: must not contain NUL`);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it("a NUL or unpaired surrogate in a query or path parameter is a 400 naming it", async () => {
    const cases: [string, string, string][] = [
      ["/api/v1/audit?limit=5&note=a%00b", "invalid_query", "note"],
      ["/api/v1/usage?group_by=user&group_by=a%00", "invalid_query", "group_by.1"],
      ["/api/v1/chats/a%00b", "invalid_path", "id"],
      ["/api/v1/users/a%00b/tokens", "invalid_path", "id"],
    ];
    for (const [url, code, field] of cases) {
      const r = await api.request("GET", url, { token: api.adminToken });
      expect(r.status, url).toBe(400);
      expect(r.body.code).toBe(code);
      expect(r.body.detail).toContain(`${field}: must not contain NUL`);
    }
  });

  it("odd bytes in the headers the API reads never make a 500", async () => {
    const me = async (headers: Record<string, string>) =>
      (await api.app.inject({ method: "GET", url: "/api/v1/me", headers })).statusCode;
    expect(await me({ authorization: "Bearer a\u0000b" })).toBe(401);
    expect(await me({ authorization: "Bearer \u00ff\u00fe\u0001" })).toBe(401);
    expect(await me({ cookie: "tether_session=a\u0000b" })).toBe(401);
    expect(await me({ authorization: `Bearer ${api.memberToken}`, "user-agent": "a\u0000b" })).toBe(
      200,
    );
    // Headers that reach the audit log: the user agent and (behind a proxy) the client address.
    for (const headers of [{ "user-agent": "ua\u0000" }, { "x-forwarded-for": "1.2.3.4\u0000" }]) {
      const r = await api.app.inject({
        method: "POST",
        url: "/api/v1/auth/login",
        headers: { "content-type": "application/json", ...headers },
        payload: JSON.stringify({ email: "member@example.com", password: "member password" }),
      });
      expect(r.statusCode, JSON.stringify(headers)).toBe(200);
    }
    const logins = await db().query<{ user_agent: string | null; ip: string | null }>(
      "SELECT user_agent, ip FROM audit_log WHERE action = 'auth.login' ORDER BY id DESC LIMIT 2",
    );
    expect(logins.rows.map((r) => [r.user_agent, r.ip].join(" "))).toEqual([
      expect.stringContaining("1.2.3.4\ufffd"),
      expect.stringContaining("ua\ufffd"),
    ]);
  });
});
