import { afterEach, beforeEach, expect, it } from "vitest";
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
});
