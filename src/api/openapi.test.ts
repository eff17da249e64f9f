import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { ROUTES } from "./openapi.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

describeDatabases("openapi", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("GET /api/v1/openapi.json is an OpenAPI 3.1 document of every route, bodies from the zod schemas", async () => {
    const r = await api.request("GET", "/api/v1/openapi.json");
    expect(r.status).toBe(200);
    expect(r.body.openapi).toBe("3.1.0");
    const paths = r.body.paths as Record<string, Record<string, Record<string, unknown>>>;
    // Every documented route exists in the API (createApi refuses a route without an entry).
    for (const key of Object.keys(ROUTES)) {
      const [method, url] = key.split(" ") as [string, string];
      expect(api.app.hasRoute({ method, url }), key).toBe(true);
    }
    const models = paths["/api/v1/models/{id}"]!.patch!;
    const schema = (models.requestBody as { content: Record<string, { schema: unknown }> }).content[
      "application/json"
    ]!.schema as { properties: Record<string, { type?: unknown }> };
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(["enabled", "input_price_per_mtok_micros", "api_key"]),
    );
    const user = paths["/api/v1/users"]!.post!;
    expect(JSON.stringify(user.requestBody)).toContain('"enum":["owner","admin","member"]');
    expect(paths["/api/v1/chats/{id}/messages/{message_id}"]!.patch!.parameters).toEqual([
      expect.objectContaining({ name: "id", in: "path", required: true }),
      expect.objectContaining({ name: "message_id", in: "path", required: true }),
    ]);
    expect(paths["/api/v1/auth/login"]!.post!.security).toEqual([]);
  });
});
