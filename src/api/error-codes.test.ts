// API errors carry a stable code (issue 11): every error body is `{message, code, detail?}`,
// the code one of the catalogue's (errors.ts API_ERRORS) at the catalogue's status, with the
// specific code where one exists; the OpenAPI document lists the catalogue.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { API_BODY_LIMIT_BYTES } from "./app.ts";
import { API_ERROR_CODES, API_ERRORS, type ApiErrorCode } from "./errors.ts";
import { startTestApi, type JsonAnswer, type TestApi } from "./test-support.ts";
import { oversizedHeadOutcomes, rawRequest } from "../../test/support/http.ts";

describeDatabases("API error codes", (db) => {
  let api: TestApi;
  let now = 1_000_000;
  beforeEach(async () => {
    now = 1_000_000;
    api = await startTestApi(db(), {
      loginThrottle: { maxFailures: 1, baseDelayMs: 60_000, maxDelayMs: 60_000, now: () => now },
    });
  });
  afterEach(async () => {
    await api.app.close();
  });

  /** The answer is an error of `code`, shaped `{message, code, detail?}`, at the code's status. */
  const expectCode = (r: JsonAnswer, code: ApiErrorCode): void => {
    expect({ status: r.status, code: r.body.code }).toEqual({
      status: API_ERRORS[code].status,
      code,
    });
    expect(typeof r.body.message).toBe("string");
    for (const key of Object.keys(r.body)) expect(["message", "code", "detail"]).toContain(key);
  };

  it("every error has a catalogue code: the generic one of its status or a specific one", async () => {
    const admin = { token: api.adminToken };
    const member = { token: api.memberToken };
    expectCode(await api.request("GET", "/api/v1/nothing", admin), "not_found");
    expectCode(await api.request("GET", "/api/v1/me"), "unauthorized");
    expectCode(await api.request("GET", "/api/v1/me", { token: "tether_wrong" }), "unauthorized");
    expectCode(await api.request("GET", "/api/v1/users", member), "forbidden");
    expectCode(await api.request("GET", "/api/v1/chats/not-a-uuid", admin), "invalid_path");
    expectCode(await api.request("GET", "/api/v1/audit?limit=0", admin), "invalid_query");
    expectCode(await api.request("POST", "/api/v1/tokens", { ...admin, body: {} }), "invalid_body");
    expectCode(
      await api.request("POST", "/api/v1/users/first", {
        body: { email: "late@example.com", password: "a long password" },
      }),
      "first_user_exists",
    );
    expectCode(
      await api.request("POST", "/api/v1/users", {
        ...admin,
        body: { email: "member@example.com", password: "a long password", role: "member" },
      }),
      "email_taken",
    );
    expectCode(
      await api.request("PATCH", `/api/v1/users/${api.adminId}`, {
        ...admin,
        body: { role: "admin" },
      }),
      "last_owner",
    );
    // Fastify's own refusals: bad JSON, a body too large, a type that is not JSON.
    const raw = async (payload: string, type: string): Promise<JsonAnswer> => {
      const r = await api.app.inject({
        method: "POST",
        url: "/api/v1/tokens",
        headers: { authorization: `Bearer ${api.adminToken}`, "content-type": type },
        payload,
      });
      return { status: r.statusCode, body: r.json(), headers: r.headers };
    };
    expectCode(await raw("{", "application/json"), "invalid_body");
    expectCode(await raw('{"__proto__": {}}', "application/json"), "invalid_body");
    expectCode(
      await raw("x".repeat(API_BODY_LIMIT_BYTES + 1), "application/json"),
      "payload_too_large",
    );
    expectCode(await raw("name=x", "text/plain"), "unsupported_media_type");
    // Sign-in: wrong password, then throttled (with Retry-After).
    const login = () =>
      api.request("POST", "/api/v1/auth/login", {
        body: { email: "member@example.com", password: "wrong password" },
      });
    expectCode(await login(), "invalid_credentials");
    const throttled = await login();
    expectCode(throttled, "rate_limited");
    expect(throttled.headers["retry-after"]).toBe("60");
    // A busy workspace; a chat without one has no processes.
    const ws = await api.request("POST", "/api/v1/workspaces", {
      ...admin,
      body: { name: "w", agent_url: "http://127.0.0.1:1" },
    });
    const running = await api.request("POST", "/api/v1/chats", {
      ...admin,
      body: { workspace_id: ws.body.id, message: "go" },
    });
    expectCode(
      await api.request("DELETE", `/api/v1/workspaces/${ws.body.id as string}`, admin),
      "workspace_busy",
    );
    await db().query("UPDATE chats SET workspace_id = NULL WHERE id = $1", [running.body.id]);
    expectCode(
      await api.request("GET", `/api/v1/chats/${running.body.id as string}/processes`, admin),
      "no_workspace",
    );
    // The cookie's CSRF rule.
    const session = await api.app.inject({
      method: "POST",
      url: "/api/v1/tokens",
      headers: { cookie: `tether_session=${api.memberToken}`, "content-type": "application/json" },
      payload: JSON.stringify({ name: "x" }),
    });
    expect(session.json()).toMatchObject({ code: "csrf_rejected" });
    expect(session.statusCode).toBe(403);
  });

  it("the OpenAPI document has the Error schema and the whole catalogue as the ErrorCode enum", async () => {
    const doc = await api.request("GET", "/api/v1/openapi.json");
    const schemas = (doc.body.components as { schemas: Record<string, Record<string, unknown>> })
      .schemas;
    expect(schemas.Error!.required).toEqual(["message", "code"]);
    expect(schemas.ErrorCode!.enum).toEqual(API_ERROR_CODES);
    for (const code of API_ERROR_CODES) {
      expect(schemas.ErrorCode!.description).toContain(`\`${code}\` (${API_ERRORS[code].status})`);
    }
    const paths = doc.body.paths as Record<string, Record<string, { responses: object }>>;
    expect(JSON.stringify(paths["/api/v1/tokens"]!.post!.responses)).toContain(
      "#/components/schemas/Error",
    );
  });

  it("a request head over 16 KiB is a 431 request_head_too_large the client reads while writing", async () => {
    // Fastify's own handler destroyed the socket with the request unread: the kernel reset the
    // connection and a client still writing got ECONNRESET instead of the answer.
    const url = await api.app.listen({ host: "127.0.0.1", port: 0 });
    const outcomes = await oversizedHeadOutcomes(url, { clients: 10, bytes: 8 << 20 });
    expect(outcomes).toEqual(Array(10).fill("431 request_head_too_large"));
    expect((await rawRequest(url, { path: "/api/v1/me" })).json().code).toBe("unauthorized");
  });
});
