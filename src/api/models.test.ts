import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { ephemeralSecretBox, SLOTS } from "../chatd/secrets/index.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

const secrets = ephemeralSecretBox();

describeDatabases("model configs", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db(), { secrets });
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("a model config never answers its API key, created or listed", async () => {
    const secret = "sk-very-secret-key";
    const created = await api.request("POST", "/api/v1/models", {
      token: api.adminToken,
      body: { provider: "openai", model: "gpt-5", api_key: secret, context_limit: 200000 },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      provider: "openai",
      model: "gpt-5",
      context_limit: 200000,
      has_api_key: true,
    });
    expect(created.body).not.toHaveProperty("api_key");
    const list = await api.request("GET", "/api/v1/models", { token: api.memberToken });
    expect(list.status).toBe(200);
    expect((list.body.models as unknown[]).length).toBe(1);
    expect(JSON.stringify(list.body)).not.toContain(secret);
    expect(JSON.stringify(created.body)).not.toContain(secret);
    const stored = await db().query("SELECT api_key FROM model_configs WHERE id = $1", [
      created.body.id,
    ]);
    // Stored sealed: the row holds nothing of the key, and opens to it in its own slot only.
    const sealed = stored.rows[0]!.api_key as string;
    expect(sealed).not.toContain(secret);
    expect(secrets.open(sealed, SLOTS.modelApiKey(created.body.id as string))).toBe(secret);
    const patched = await api.request("PATCH", `/api/v1/models/${created.body.id as string}`, {
      token: api.adminToken,
      body: { api_key: `${secret}-2` },
    });
    expect(patched.status).toBe(200);
    const again = await db().query("SELECT api_key FROM model_configs WHERE id = $1", [
      created.body.id,
    ]);
    expect(again.rows[0]!.api_key).not.toContain(secret);
    expect(
      secrets.open(again.rows[0]!.api_key as string, SLOTS.modelApiKey(created.body.id as string)),
    ).toBe(`${secret}-2`);
  });

  it("is_default true clears it on every other config", async () => {
    const make = async (model: string, isDefault: boolean): Promise<string> => {
      const r = await api.request("POST", "/api/v1/models", {
        token: api.adminToken,
        body: { provider: "demo", model, is_default: isDefault },
      });
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const a = await make("a", true);
    const b = await make("b", false);
    const c = await make("c", true);
    const rows = await db().query<{ id: string; is_default: boolean }>(
      "SELECT id, is_default FROM model_configs",
    );
    const defaults = rows.rows.filter((r) => r.is_default).map((r) => r.id);
    expect(defaults).toEqual([c]);
    expect([a, b]).not.toContain(defaults[0]);
  });

  it("the default model stays enabled: disabling it, or defaulting a disabled one, is 409 and changes nothing", async () => {
    const post = (body: object) =>
      api.request("POST", "/api/v1/models", { token: api.adminToken, body });
    const patch = (id: string, body: object) =>
      api.request("PATCH", `/api/v1/models/${id}`, { token: api.adminToken, body });
    const a = (await post({ provider: "demo", model: "a", is_default: true })).body.id as string;
    const b = (await post({ provider: "demo", model: "b", enabled: false })).body.id as string;
    expect((await patch(a, { enabled: false })).status).toBe(409);
    const refused = await patch(b, { is_default: true });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toBe("The default model must be enabled.");
    expect(
      (await post({ provider: "demo", model: "c", is_default: true, enabled: false })).status,
    ).toBe(409);
    const rows = await db().query<{ model: string; is_default: boolean; enabled: boolean }>(
      "SELECT model, is_default, enabled FROM model_configs ORDER BY model",
    );
    expect(rows.rows).toEqual([
      { model: "a", is_default: true, enabled: true },
      { model: "b", is_default: false, enabled: false },
    ]);
    // Enabling it in the same change is fine.
    expect((await patch(b, { is_default: true, enabled: true })).status).toBe(200);
  });

  it("bad input is a 400 naming the field", async () => {
    const bad = async (body: unknown, field: string): Promise<void> => {
      const r = await api.request("POST", "/api/v1/models", { token: api.adminToken, body });
      expect(r.status).toBe(400);
      expect(r.body.detail).toContain(field);
    };
    await bad({ provider: "acme", model: "x" }, "provider");
    await bad({ provider: "openai" }, "model");
    await bad({ provider: "openai-compatible", model: "llama" }, "base_url");
    await bad({ provider: "openai", model: "x", context_limit: -1 }, "context_limit");
    await bad({ provider: "openai", model: "x", is_default: "yes" }, "is_default");
  });
});
