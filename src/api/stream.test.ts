import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { StreamBuffer, type StreamListener } from "../chatd/stream.ts";
import type { Database } from "../chatd/db/index.ts";
import { sendMessage } from "../chatd/transitions/index.ts";
import { CHAT_WITH_VISIBLE_MESSAGES_SQL } from "./stream.ts";
import {
  openSse,
  startTestApi,
  type SseEvent,
  type SseReader,
  type TestApi,
} from "./test-support.ts";

/** A buffer that counts its live subscriptions, to see that a stream lets go of its own. */
class CountingBuffer extends StreamBuffer {
  active = 0;
  override subscribe(chatId: string, listener: StreamListener): () => void {
    this.active += 1;
    const off = super.subscribe(chatId, listener);
    return () => {
      this.active -= 1;
      off();
    };
  }
}

/** `db`, recording the text of every statement run outside a transaction (each its own commit). */
function recording(db: Database): { db: Database; statements: string[] } {
  const statements: string[] = [];
  const proxy = new Proxy(db, {
    get(target, key) {
      if (key === "query")
        return (sql: string, params?: unknown[]) => {
          statements.push(sql);
          return target.query(sql, params);
        };
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: proxy, statements };
}

/** The statements that read or write chats or their messages (not the token lookups). */
const chatStatements = (statements: string[]): string[] =>
  statements.filter((s) => /\bchat(s|_messages)\b/.test(s));

const ofType = (events: SseEvent[], type: string): SseEvent[] =>
  events.filter((e) => e.event === type);

describeDatabases("chat event stream", (db) => {
  let api: TestApi;
  let buffer: CountingBuffer;
  let baseUrl: string;
  let statements: string[];
  const readers: SseReader[] = [];
  beforeEach(async () => {
    buffer = new CountingBuffer();
    const r = recording(db());
    statements = r.statements;
    api = await startTestApi(r.db, { buffer });
    await api.app.listen({ host: "127.0.0.1", port: 0 });
    baseUrl = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    for (const r of readers.splice(0)) r.close();
    await api.app.close();
  });

  const open = async (path: string, token = api.memberToken): Promise<SseReader> => {
    const r = await openSse(baseUrl, path, token);
    readers.push(r);
    return r;
  };

  const newChat = async (): Promise<string> =>
    (await api.request("POST", "/api/v1/chats", { token: api.memberToken, body: {} })).body
      .id as string;

  const insert = async (chatId: string, role: string, text: string): Promise<string> =>
    (
      await db().query<{ id: string }>(
        "INSERT INTO chat_messages (chat_id, role, visibility, content) VALUES ($1, $2, 'both', $3) RETURNING id",
        [chatId, role, JSON.stringify([{ type: "text", text }])],
      )
    ).rows[0]!.id;

  it("sends the committed messages after after_id first, then a newly committed message and the status change live", async () => {
    const chatId = await newChat();
    const m1 = await insert(chatId, "user", "first");
    const m2 = await insert(chatId, "assistant", "second");
    const sse = await open(`/api/v1/chats/${chatId}/stream?after_id=${m1}`);
    expect(sse.status).toBe(200);
    expect(sse.headers["content-type"]).toContain("text/event-stream");
    const start = await sse.until((es) => ofType(es, "status").length === 1);
    expect(start.map((e) => e.event)).toEqual(["message", "status"]);
    expect(start[0]).toEqual({
      event: "message",
      id: m2,
      data: {
        id: m2,
        role: "assistant",
        parts: [{ type: "text", text: "second" }],
        created_at: expect.any(String),
      },
    });
    expect(start[1]!.data).toEqual({ status: "waiting", retrying: null });

    const sent = await sendMessage(db(), chatId, api.memberId, "third", "queue");
    const live = await sse.until(
      (es) => ofType(es, "message").length === 2 && ofType(es, "status").length === 2,
    );
    const third = ofType(live, "message")[1]!;
    expect(third.data).toMatchObject({
      id: sent.messageId,
      role: "user",
      parts: [{ type: "text", text: "third" }],
    });
    expect(ofType(live, "status")[1]!.data).toEqual({ status: "running", retrying: null });
    expect(ofType(live, "message").map((e) => e.id)).toEqual([m2, sent.messageId]);
  });

  it("the first refresh reads the chat and its messages in one statement", async () => {
    const chatId = await newChat();
    const m1 = await insert(chatId, "user", "first");
    const m2 = await insert(chatId, "assistant", "second");
    statements.length = 0;
    const sse = await open(`/api/v1/chats/${chatId}/stream?after_id=${m1}`);
    const events = await sse.until((es) => ofType(es, "status").length === 1);
    expect(ofType(events, "message").map((e) => e.id)).toEqual([m2]);
    expect(chatStatements(statements)).toEqual([CHAT_WITH_VISIBLE_MESSAGES_SQL]);
  });

  it("without after_id every committed message comes first, in order", async () => {
    const chatId = await newChat();
    const ids = [await insert(chatId, "user", "a"), await insert(chatId, "assistant", "b")];
    const sse = await open(`/api/v1/chats/${chatId}/stream`);
    const events = await sse.until((es) => es.some((e) => e.event === "status"));
    expect(ofType(events, "message").map((e) => e.id)).toEqual(ids);
    expect(events.findIndex((e) => e.event === "status")).toBe(2);
  });

  it("sends the current episode's parts at connect and later parts live, and lets go when the client leaves", async () => {
    const chatId = await newChat();
    buffer.begin(chatId, "7", 1);
    buffer.append(chatId, { type: "text-delta", text: "Hel" });
    const sse = await open(`/api/v1/chats/${chatId}/stream`);
    await sse.until((es) => ofType(es, "part").length === 1);
    buffer.append(chatId, { type: "text-delta", text: "lo" });
    const events = await sse.until((es) => ofType(es, "part").length === 2);
    expect(ofType(events, "part").map((e) => e.data)).toEqual([
      {
        history_version: "7",
        generation_attempt: 1,
        seq: 0,
        part: { type: "text-delta", text: "Hel" },
      },
      {
        history_version: "7",
        generation_attempt: 1,
        seq: 1,
        part: { type: "text-delta", text: "lo" },
      },
    ]);
    expect(buffer.active).toBe(1);
    sse.close();
    const deadline = Date.now() + 5_000;
    while (buffer.active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(buffer.active).toBe(0);
  });

  it("a chat's workspace event stops once the chat's owner may no longer use the workspace", async () => {
    const t = await api.request("POST", "/api/v1/templates", {
      token: api.adminToken,
      body: { name: "dev", files: { "main.tf": 'resource "terraform_data" "x" {}\n' } },
    });
    const w = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "team box", template_id: t.body.id },
    });
    const share = (shared: boolean) =>
      api.request("PATCH", `/api/v1/workspaces/${w.body.id as string}`, {
        token: api.adminToken,
        body: { shared },
      });
    expect((await share(true)).status).toBe(200);
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: w.body.id },
    });
    expect(chat.status).toBe(201);
    const path = `/api/v1/chats/${chat.body.id as string}/stream`;
    const before = await open(path);
    const seen = await before.until((es) => ofType(es, "status").length === 1);
    expect(ofType(seen, "workspace")).toMatchObject([{ data: { workspace_id: w.body.id } }]);
    before.close();

    expect((await share(false)).status).toBe(200);
    const after = await open(path);
    const events = await after.until((es) => ofType(es, "status").length === 1);
    expect(ofType(events, "workspace")).toEqual([]);
    // An admin reading the chat still sees it.
    const staff = await open(path, api.adminToken);
    const staffEvents = await staff.until((es) => ofType(es, "status").length === 1);
    expect(ofType(staffEvents, "workspace")).toHaveLength(1);
  });

  it("closing the API ends open streams", async () => {
    const chatId = await newChat();
    const sse = await open(`/api/v1/chats/${chatId}/stream`);
    await sse.until((es) => es.length > 0);
    await api.app.close();
    expect(buffer.active).toBe(0);
  });

  it("a bad after_id is a 400 naming it", async () => {
    const chatId = await newChat();
    const r = await api.request("GET", `/api/v1/chats/${chatId}/stream?after_id=abc`, {
      token: api.memberToken,
    });
    expect(r.status).toBe(400);
    expect(r.body.detail).toContain("after_id");
  });
});
