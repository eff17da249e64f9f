// A template's max_ttl_ms: the longest TTL a member's workspace may ask for (0, never stop, is
// above any cap); admins and owners are not held to it; the template's own default keeps within
// it, so a member who asks for nothing is within it too.

import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

const FILES = { "main.tf": 'resource "terraform_data" "x" {}\n' };
const HOUR = 3_600_000;

describeDatabases("a template's max_ttl_ms", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  const template = async (body: Record<string, unknown>) => {
    const r = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: FILES, ...body },
    });
    expect(r.status).toBe(201);
    return r.body as { id: string; max_ttl_ms: number | null };
  };
  const workspace = (templateId: string, token: string, ttl?: number) =>
    api.request("POST", "/api/v1/workspaces", {
      token,
      body: { name: "box", template_id: templateId, ...(ttl !== undefined && { ttl_ms: ttl }) },
    });

  it("a member's ttl_ms above the cap, or 0, is a 400 naming ttl_ms; within it, or none, is taken", async () => {
    const t = await template({ default_ttl_ms: HOUR, max_ttl_ms: 8 * HOUR });
    expect(t.max_ttl_ms).toBe(8 * HOUR);

    const never = await workspace(t.id, api.memberToken, 0);
    expect(never.status).toBe(400);
    expect(never.body).toMatchObject({
      code: "invalid_body",
      message: expect.stringContaining("ttl_ms 0 (never stop) is not allowed") as unknown,
      detail: expect.stringMatching(/^ttl_ms: at most 28800000, and not 0/) as unknown,
    });
    const long = await workspace(t.id, api.memberToken, 8 * HOUR + 1);
    expect(long.status).toBe(400);
    expect(long.body.message).toBe(
      "ttl_ms 28800001 is above this template's max_ttl_ms (28800000).",
    );
    // Nothing was made by the refusals.
    const none = await db().query("SELECT 1 FROM workspaces WHERE template_id = $1", [t.id]);
    expect(none.rows).toHaveLength(0);

    const within = await workspace(t.id, api.memberToken, 8 * HOUR);
    expect(within.status).toBe(201);
    expect(within.body.ttl_ms).toBe(8 * HOUR);
    const byDefault = await workspace(t.id, api.memberToken);
    expect(byDefault.status).toBe(201);
    expect(byDefault.body.ttl_ms).toBe(HOUR);
  });

  it("admins and owners are not held to it", async () => {
    const t = await template({ max_ttl_ms: 2 * HOUR });
    const r = await workspace(t.id, api.adminToken, 0);
    expect(r.status).toBe(201);
    expect(r.body.ttl_ms).toBe(0);
  });

  it("without a cap a member may ask for any TTL, 0 included", async () => {
    const t = await template({});
    expect(t.max_ttl_ms).toBeNull();
    const r = await workspace(t.id, api.memberToken, 0);
    expect(r.status).toBe(201);
  });

  it("only admins set it; the template's default must keep within it; null removes it", async () => {
    const bad = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: FILES, default_ttl_ms: 0, max_ttl_ms: HOUR },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/^default_ttl_ms: at most max_ttl_ms \(3600000\)/);
    const t = await template({ default_ttl_ms: HOUR });
    const byMember = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.memberToken,
      body: { max_ttl_ms: HOUR },
    });
    expect(byMember.status).toBe(403);
    const tooSmall = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
      body: { max_ttl_ms: HOUR / 2 },
    });
    expect(tooSmall.status).toBe(400);
    const both = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
      body: { default_ttl_ms: HOUR / 4, max_ttl_ms: HOUR / 2 },
    });
    expect(both.body).toMatchObject({ default_ttl_ms: HOUR / 4, max_ttl_ms: HOUR / 2 });
    expect((await workspace(t.id, api.memberToken, HOUR)).status).toBe(400);
    const cleared = await api.request("PATCH", `/api/v1/templates/${t.id}`, {
      token: api.adminToken,
      body: { max_ttl_ms: null },
    });
    expect(cleared.body.max_ttl_ms).toBeNull();
    expect((await workspace(t.id, api.memberToken, 0)).status).toBe(201);
    const audits = await db().query<{ details: Record<string, unknown> }>(
      "SELECT details FROM audit_log WHERE action = 'template.update' ORDER BY id",
    );
    expect(audits.rows.map((r) => r.details.max_ttl_ms)).toEqual([HOUR / 2, null]);
  });
});
