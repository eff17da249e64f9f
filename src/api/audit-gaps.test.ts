// Audit gaps (issue 11, item 10): messages sent (who, chat, size — never the text), staff
// reading another user's chat, its processes or their output, and throttled sign-ins are in the
// audit log; every answer, the UI's and the API's, carries the security headers.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

interface Entry {
  user_id: string | null;
  action: string;
  target: string | null;
  details: Record<string, unknown>;
}

describeDatabases("audit gaps", (db) => {
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

  const entries = async (action: string): Promise<Entry[]> =>
    (
      (await api.request("GET", "/api/v1/audit?limit=500", { token: api.adminToken })).body
        .entries as Entry[]
    )
      .filter((e) => e.action === action)
      .reverse();

  it("a message sent is audited with who, the chat and its size in bytes, never its text", async () => {
    const text = "héllo, a private message";
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: text },
    });
    const id = chat.body.id as string;
    await db().query("UPDATE chats SET status = 'waiting' WHERE id = $1", [id]);
    const sent = await api.request("POST", `/api/v1/chats/${id}/messages`, {
      token: api.memberToken,
      body: { text: "second 🙂" },
    });
    expect(sent.status).toBe(202);
    const created = await entries("chat.create");
    expect(created).toEqual([
      expect.objectContaining({
        user_id: api.memberId,
        target: id,
        details: expect.objectContaining({ message_bytes: Buffer.byteLength(text) }) as object,
      }),
    ]);
    expect(await entries("chat.message")).toEqual([
      expect.objectContaining({
        user_id: api.memberId,
        target: id,
        details: expect.objectContaining({ bytes: Buffer.byteLength("second 🙂") }) as object,
      }),
    ]);
    const all = await db().query("SELECT details::text AS d FROM audit_log");
    for (const r of all.rows) {
      expect(r.d).not.toContain("private message");
      expect(r.d).not.toContain("second");
    }
  });

  it("staff reading another user's chat, messages, queue, usage, processes or output is audited once per read; the owner's own reads are not", async () => {
    const ws = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "w", agent_url: "http://127.0.0.1:1", agent_token: "t" },
    });
    await api.request("PATCH", `/api/v1/workspaces/${ws.body.id as string}`, {
      token: api.adminToken,
      body: { shared: true },
    });
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: ws.body.id },
    });
    const id = chat.body.id as string;
    const reads = [
      `/api/v1/chats/${id}`,
      `/api/v1/chats/${id}/messages`,
      `/api/v1/chats/${id}/queue`,
      `/api/v1/chats/${id}/usage`,
      `/api/v1/chats/${id}/processes`,
      `/api/v1/chats/${id}/processes/p1/output`,
    ];
    for (const url of reads) await api.request("GET", url, { token: api.memberToken });
    expect(await entries("chat.staff_read")).toEqual([]);
    for (const url of reads) await api.request("GET", url, { token: api.adminToken });
    const staffReads = await entries("chat.staff_read");
    expect(staffReads.map((e) => [e.user_id, e.target, e.details.route])).toEqual([
      [api.adminId, id, "GET /api/v1/chats/:id"],
      [api.adminId, id, "GET /api/v1/chats/:id/messages"],
      [api.adminId, id, "GET /api/v1/chats/:id/queue"],
      [api.adminId, id, "GET /api/v1/chats/:id/usage"],
      [api.adminId, id, "GET /api/v1/chats/:id/processes"],
      [api.adminId, id, "GET /api/v1/chats/:id/processes/:process_id/output"],
    ]);
    expect(staffReads[0]!.details.owner_id).toBe(api.memberId);
    expect(staffReads[5]!.details.process_id).toBe("p1");
  });

  it("a throttled sign-in is audited with the email and the user", async () => {
    const login = () =>
      api.request("POST", "/api/v1/auth/login", {
        body: { email: "member@example.com", password: "wrong password" },
      });
    await login();
    expect((await login()).status).toBe(429);
    expect(await entries("auth.login_throttled")).toEqual([
      expect.objectContaining({
        user_id: api.memberId,
        details: { email: "member@example.com", retry_after_s: 60 },
      }),
    ]);
  });

  it("every answer carries a CSP, no framing, nosniff and no referrer", async () => {
    const answers = [
      await api.app.inject({ method: "GET", url: "/" }),
      await api.app.inject({ method: "GET", url: "/api/v1/health" }),
      await api.app.inject({ method: "GET", url: "/api/v1/me" }),
      await api.app.inject({ method: "GET", url: "/api/v1/nothing" }),
    ];
    for (const a of answers) {
      expect(a.headers["content-security-policy"]).toContain("default-src 'self'");
      expect(a.headers["content-security-policy"]).toContain("script-src 'self'");
      expect(a.headers["content-security-policy"]).toContain("frame-ancestors 'none'");
      expect(a.headers["x-frame-options"]).toBe("DENY");
      expect(a.headers["x-content-type-options"]).toBe("nosniff");
      expect(a.headers["referrer-policy"]).toBe("no-referrer");
    }
  });
});
