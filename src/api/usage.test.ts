import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import type { MessagePart } from "../chatd/messages.ts";
import { insertMessage, startTestApi, type TestApi } from "./test-support.ts";

describeDatabases("chat usage", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    api = await startTestApi(db());
  });
  afterEach(async () => {
    await api.app.close();
  });

  const createChat = async (token: string, body: object = {}): Promise<Record<string, unknown>> => {
    const r = await api.request("POST", "/api/v1/chats", { token, body });
    expect(r.status).toBe(201);
    return r.body;
  };

  it("usage sums model runtime, tool batch runtime and billed calls, tokens and cost", async () => {
    const chat = await createChat(api.memberToken, { message: "work" });
    const id = chat.id as string;
    const text = (t: string): MessagePart[] => [{ type: "text", text: t }];
    const usage = (ms: number, calls: number): MessagePart[] => [
      { type: "tool-batch-usage", billed_ms: ms, billed_calls: calls },
    ];
    await insertMessage(db(), id, {
      role: "assistant",
      visibility: "both",
      content: text("a"),
      runtime_ms: 1000,
      tokens: [100, 10],
      cost: 7,
    });
    await insertMessage(db(), id, {
      role: "tool",
      visibility: "both",
      content: text("result"),
      runtime_ms: 99,
    });
    await insertMessage(db(), id, {
      role: "tool",
      visibility: "model",
      content: usage(300, 2),
      runtime_ms: 300,
    });
    await insertMessage(db(), id, {
      role: "assistant",
      visibility: "both",
      content: text("b"),
      runtime_ms: 250,
      tokens: [200, 20],
      cost: 3,
    });
    await insertMessage(db(), id, {
      role: "tool",
      visibility: "model",
      content: usage(45, 3),
      runtime_ms: 45,
    });
    const r = await api.request("GET", `/api/v1/chats/${id}/usage`, { token: api.memberToken });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      runtime_ms: 1595,
      model_runtime_ms: 1250,
      tool_runtime_ms: 345,
      billed_calls: 5,
      input_tokens: 300,
      output_tokens: 30,
      cost_micros: 10,
    });
  });

  it("a chat with nothing spent answers zeros", async () => {
    const chat = await createChat(api.memberToken);
    const r = await api.request("GET", `/api/v1/chats/${chat.id as string}/usage`, {
      token: api.memberToken,
    });
    expect(r.body).toEqual({
      runtime_ms: 0,
      model_runtime_ms: 0,
      tool_runtime_ms: 0,
      billed_calls: 0,
      input_tokens: 0,
      output_tokens: 0,
      cost_micros: 0,
    });
  });

  describe("the usage report", () => {
    /** A chat of `token`'s user with one model call and one tool batch at `at`. */
    const spend = async (token: string, at: string, modelMs: number, toolMs: number) => {
      const id = (await createChat(token, { title: `chat at ${at}` })).id as string;
      await insertMessage(db(), id, {
        role: "assistant",
        visibility: "both",
        content: [{ type: "text", text: "a" }],
        runtime_ms: modelMs,
        tokens: [10, 1],
        cost: 2,
      });
      await insertMessage(db(), id, {
        role: "tool",
        visibility: "model",
        content: [{ type: "tool-batch-usage", billed_ms: toolMs, billed_calls: 1 }],
        runtime_ms: toolMs,
      });
      await db().query("UPDATE chat_messages SET created_at = $2 WHERE chat_id = $1", [id, at]);
      return id;
    };
    const report = async (token: string, query: string) => {
      const r = await api.request("GET", `/api/v1/usage${query}`, { token });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.rows as Record<string, unknown>[];
    };

    it("groups by user, chat or hour; members see their own rows, admins everyone's", async () => {
      const m1 = await spend(api.memberToken, "2026-11-01T10:15:00Z", 100, 1000);
      const m2 = await spend(api.memberToken, "2026-11-01T11:45:00Z", 200, 2000);
      const a1 = await spend(api.adminToken, "2026-11-01T10:30:00Z", 400, 4000);
      const totals = (model: number, tool: number, calls: number) => ({
        runtime_ms: model + tool,
        model_runtime_ms: model,
        tool_runtime_ms: tool,
        billed_calls: calls,
        input_tokens: 10 * calls,
        output_tokens: calls,
        cost_micros: 2 * calls,
      });
      // Rows by user or period carry the workspaces' running time too (none here).
      const idle = { workspace_runtime_ms: 0 };

      expect(await report(api.memberToken, "?group_by=user")).toEqual([
        { user_id: api.memberId, email: "member@example.com", ...totals(300, 3000, 2), ...idle },
      ]);
      const everyone = await report(api.adminToken, "");
      expect(everyone).toHaveLength(2);
      expect(everyone).toEqual(
        expect.arrayContaining([
          { user_id: api.memberId, email: "member@example.com", ...totals(300, 3000, 2), ...idle },
          { user_id: api.adminId, email: "admin@example.com", ...totals(400, 4000, 1), ...idle },
        ]),
      );
      expect(await report(api.memberToken, "?group_by=chat")).toEqual(
        [
          { chat_id: m1, title: "chat at 2026-11-01T10:15:00Z", ...totals(100, 1000, 1) },
          { chat_id: m2, title: "chat at 2026-11-01T11:45:00Z", ...totals(200, 2000, 1) },
        ].sort((x, y) => x.chat_id.localeCompare(y.chat_id)),
      );
      expect((await report(api.adminToken, "?group_by=chat")).map((r) => r.chat_id)).toContain(a1);
      expect(await report(api.adminToken, "?group_by=hour")).toEqual([
        { hour: "2026-11-01T10:00:00Z", ...totals(500, 5000, 2), ...idle },
        { hour: "2026-11-01T11:00:00Z", ...totals(200, 2000, 1), ...idle },
      ]);
      // `from` is inclusive, `to` exclusive; offsets are honoured.
      expect(
        await report(
          api.adminToken,
          "?group_by=hour&from=2026-11-01T11:45:00%2B00:00&to=2026-11-02",
        ),
      ).toEqual([{ hour: "2026-11-01T11:00:00Z", ...totals(200, 2000, 1), ...idle }]);
      expect(
        await report(api.memberToken, "?from=2026-11-01T11:15:00%2B01:00&to=2026-11-01T11:45:00Z"),
      ).toEqual([
        { user_id: api.memberId, email: "member@example.com", ...totals(100, 1000, 1), ...idle },
      ]);
      expect(await report(api.memberToken, "?from=2026-12-01")).toEqual([]);
    });

    it("bad parameters are a 400 naming the parameter", async () => {
      for (const [query, field] of [
        ["?group_by=model", "group_by"],
        ["?from=yesterday", "from"],
        ["?to=2026-13-01", "to"],
        ["?from=2026-11-02&to=2026-11-01", "to"],
      ]) {
        const r = await api.request("GET", `/api/v1/usage${query}`, { token: api.memberToken });
        expect(r.status, query).toBe(400);
        expect(r.body.detail, query).toContain(field);
      }
      expect((await api.request("GET", "/api/v1/usage", {})).status).toBe(401);
    });
  });
});
