import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { StreamBuffer, type StreamListener } from "../chatd/stream.ts";
import { randomUUID } from "node:crypto";
import type { Database } from "../chatd/db/index.ts";
import type { Fence } from "../chatd/chats.ts";
import { FEED_MS, MessageFeed } from "../chatd/message-feed.ts";
import type { NewMessage } from "../chatd/messages.ts";
import {
  acquire,
  commitFinalStep,
  commitStep,
  HELD_CHAT_MS,
  HeldChat,
  loadChat,
  sendMessage,
} from "../chatd/transitions/index.ts";
import { realClock, type Clock } from "../contract/index.ts";
import { CHAT_WITH_VISIBLE_MESSAGES_SQL, SSE_HEARTBEAT_MS } from "./stream.ts";
import { VISIBLE_MESSAGES_SQL } from "./views.ts";
import { startTestAgent } from "../../test/support/agent.ts";
import { testWorker } from "../../test/support/chatd.ts";
import { startFakeProvider } from "../../test/support/fake-provider.ts";
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

/** `db` with each statement run outside a transaction going through `before` first. */
function beforeEachQuery(db: Database, before: (sql: string) => Promise<void> | void): Database {
  return new Proxy(db, {
    get(target, key) {
      if (key === "query")
        return async (sql: string, params?: unknown[]) => {
          await before(sql);
          return target.query(sql, params);
        };
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** `db`, recording the text of every statement run outside a transaction (each its own commit). */
function recording(db: Database): { db: Database; statements: string[] } {
  const statements: string[] = [];
  return { db: beforeEachQuery(db, (sql) => void statements.push(sql)), statements };
}

/** The statements that read or write chats or their messages (not the token lookups). */
const chatStatements = (statements: string[]): string[] =>
  statements.filter((s) => /\bchat(s|_messages)\b/.test(s));

/**
 * Commits `messages` as the chat's runner does a step (`final`: the step that ends the turn),
 * telling this replica's `feed` when given (else as another replica's runner).
 */
async function commitAsRunner(
  db: Database,
  chatId: string,
  workerId: string,
  runnerId: string,
  messages: NewMessage[],
  o: { feed?: MessageFeed; final?: boolean },
): Promise<void> {
  const held = o.feed ? new HeldChat(realClock, HELD_CHAT_MS, o.feed) : undefined;
  const chat = (await loadChat(db, chatId))!;
  held?.read(chat);
  const fence: Fence = {
    chatId,
    workerId,
    runnerId,
    status: "running",
    historyVersion: chat.historyVersion,
  };
  await (o.final ? commitFinalStep : commitStep)(db, fence, messages, held);
}

/** Has `api` listen on a free loopback port; answers its base URL. */
async function listening(api: TestApi): Promise<string> {
  await api.app.listen({ host: "127.0.0.1", port: 0 });
  return `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
}

const ofType = (events: SseEvent[], type: string): SseEvent[] =>
  events.filter((e) => e.event === type);

describeDatabases("chat event stream", (db) => {
  let api: TestApi;
  let buffer: CountingBuffer;
  let baseUrl: string;
  let statements: string[];
  let feed: MessageFeed;
  /** The feed's clock (a test may make it hasty). */
  let feedClock: Clock;
  const readers: SseReader[] = [];
  beforeEach(async () => {
    buffer = new CountingBuffer();
    const r = recording(db());
    statements = r.statements;
    feedClock = realClock;
    feed = new MessageFeed({
      now: () => feedClock.now(),
      setTimer: (ms, fn) => realClock.setTimer(ms, fn),
    });
    api = await startTestApi(r.db, { buffer, feed });
    baseUrl = await listening(api);
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

  it("a create that asks for an event stream answers with the new chat's stream", async () => {
    const sse = await openSse(baseUrl, "/api/v1/chats", api.memberToken, { message: "go" });
    readers.push(sse);
    expect(sse.status).toBe(201);
    expect(sse.headers["content-type"]).toContain("text/event-stream");
    const start = await sse.until((es) => ofType(es, "status").length === 1);
    expect(start.map((e) => e.event)).toEqual(["chat", "message", "status"]);
    const chat = start[0]!.data as { id: string; status: string };
    expect(sse.headers.location).toBe(`/api/v1/chats/${chat.id}`);
    // The `chat` event is what the JSON answer holds; the stream is the chat's from its start.
    const json = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: {},
    });
    expect(Object.keys(chat).sort()).toEqual(Object.keys(json.body).sort());
    expect(chat).toMatchObject({ status: "running", title: "go", workspace_id: null });
    expect(start[1]!.data).toMatchObject({ role: "user", parts: [{ type: "text", text: "go" }] });
    expect(start[2]!.data).toEqual({ status: "running", retrying: null });

    // Then the turn, live, as on GET .../stream.
    await runTurn(chat.id, () => feed);
    await expectTurnSentOnce(chat.id, await turnMessages(sse));
  });

  it("a create that asks for an event stream and is refused answers its error as JSON", async () => {
    const missing = randomUUID();
    const r = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      headers: { accept: "text/event-stream" },
      body: { workspace_id: missing, message: "go" },
    });
    expect(r.status).toBe(404);
    expect(r.headers["content-type"]).toContain("application/json");
    expect(r.body).toMatchObject({ code: "not_found" });
    const bad = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      headers: { accept: "text/event-stream" },
      body: { message: " " },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "invalid_body" });
    // Nothing was created by either.
    const list = await api.request("GET", "/api/v1/chats", { token: api.memberToken });
    expect(list.body.chats).toEqual([]);
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

  it("a member's stream reads who may use the chat's workspace with the chat", async () => {
    const workspaceId = randomUUID();
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, owner_id) VALUES ($1, $2, 'http://127.0.0.1:1', $3)",
      [workspaceId, `ws-${workspaceId}`, api.memberId],
    );
    const chatId = (
      await api.request("POST", "/api/v1/chats", {
        token: api.memberToken,
        body: { workspace_id: workspaceId },
      })
    ).body.id as string;
    statements.length = 0;
    const sse = await open(`/api/v1/chats/${chatId}/stream`);
    await sse.until((es) => ofType(es, "status").length === 1);
    expect(statements.filter((s) => s === CHAT_WITH_VISIBLE_MESSAGES_SQL)).toHaveLength(1);
    // Not read again for the `workspace` events' access check (a template workspace's state,
    // read by the events themselves, is another statement).
    expect(statements.filter((s) => /^SELECT \* FROM workspaces\b/.test(s))).toEqual([]);
  });

  /** A model step → tool → model step turn of a running chat, as a worker commits it. */
  const turnSteps: NewMessage[][] = [
    [
      {
        role: "assistant",
        visibility: "both",
        content: [{ type: "tool-call", tool_call_id: "c1", tool_name: "execute", args: {} }],
      },
    ],
    [
      {
        role: "tool",
        visibility: "both",
        content: [
          {
            type: "tool-result",
            tool_call_id: "c1",
            tool_name: "execute",
            is_error: false,
            result: { exit_code: 0 },
          },
        ],
      },
    ],
    [
      { role: "assistant", visibility: "both", content: [{ type: "text", text: "done" }] },
      // A message the model alone sees: never sent, from the feed or a read.
      { role: "assistant", visibility: "model", content: [{ type: "text", text: "hidden" }] },
    ],
  ];

  /**
   * Runs `turnSteps` on the chat as a runner does; each step's commit goes to `feedOf(step)`
   * (undefined: another replica commits it, so this one's feed never has it).
   */
  const runTurn = async (
    chatId: string,
    feedOf: (step: number) => MessageFeed | undefined,
  ): Promise<void> => {
    const workerId = randomUUID();
    const [claimed] = await acquire(db(), workerId, { leaseMs: 60_000, limit: 10 });
    expect(claimed?.chatId).toBe(chatId);
    for (const [step, messages] of turnSteps.entries()) {
      await commitAsRunner(db(), chatId, workerId, claimed!.runnerId, messages, {
        feed: feedOf(step),
        final: step === turnSteps.length - 1,
      });
    }
  };

  /** A chat created through the API with its first message, and its stream once it shows it. */
  const startedChat = async (): Promise<{ chatId: string; sse: SseReader }> => {
    const created = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: "run true" },
    });
    expect(created.status).toBe(201);
    const chatId = created.body.id as string;
    const sse = await open(`/api/v1/chats/${chatId}/stream`);
    await sse.until((es) => ofType(es, "status").length === 1);
    return { chatId, sse };
  };

  /** The turn's messages as the stream sent them, once the chat waits again. */
  const turnMessages = async (sse: SseReader): Promise<SseEvent[]> => {
    const events = await sse.until((es) =>
      ofType(es, "status").some((e) => (e.data as { status: string }).status === "waiting"),
    );
    return ofType(events, "message");
  };

  const expectTurnSentOnce = async (chatId: string, messages: SseEvent[]): Promise<void> => {
    const visible = await db().query<{ id: string }>(VISIBLE_MESSAGES_SQL, [chatId, "0"]);
    expect(visible.rows).toHaveLength(4);
    expect(messages.map((e) => e.id)).toEqual(visible.rows.map((r) => r.id));
    expect(messages.map((e) => (e.data as { role: string }).role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);
  };

  const messageReads = (): number => statements.filter((s) => s === VISIBLE_MESSAGES_SQL).length;

  it("a turn committed on this replica reaches the stream with no read after the first refresh", async () => {
    const { chatId, sse } = await startedChat();
    statements.length = 0;
    await runTurn(chatId, () => feed);
    await expectTurnSentOnce(chatId, await turnMessages(sse));
    // Not a message read, nor a chat read: the change payloads say what the stream shows.
    expect(chatStatements(statements)).toEqual([]);
    expect(feed.size).toBeLessThanOrEqual(3);

    // The API's own commit of a message goes to the stream the same way.
    statements.length = 0;
    const sent = await api.request("POST", `/api/v1/chats/${chatId}/messages`, {
      token: api.memberToken,
      body: { text: "again" },
    });
    expect(sent.status).toBe(202);
    const events = await sse.until((es) => ofType(es, "message").length === 5);
    expect(ofType(events, "message")[4]!.id).toBe(sent.body.message_id);
    expect(messageReads()).toBe(0);
    sse.close();
    // Once nobody here follows the chat, nothing of it is held.
    const deadline = Date.now() + 5_000;
    while (feed.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(feed.size).toBe(0);
  });

  it("a commit this replica did not make is read, and the stream goes on from memory after it", async () => {
    const { chatId, sse } = await startedChat();
    statements.length = 0;
    // The model step on another replica, the tool's results and the answer on this one.
    await runTurn(chatId, (step) => (step === 0 ? undefined : feed));
    await expectTurnSentOnce(chatId, await turnMessages(sse));
    expect(messageReads()).toBe(1);
  });

  it("commits no longer held are read: every message still goes out once, in order", async () => {
    // Every look at this feed's clock is past the last one's entries.
    let t = 0;
    feedClock = { now: () => (t += FEED_MS + 1), setTimer: (ms, fn) => realClock.setTimer(ms, fn) };

    const { chatId, sse } = await startedChat();
    statements.length = 0;
    await runTurn(chatId, () => feed);
    await expectTurnSentOnce(chatId, await turnMessages(sse));
    expect(messageReads()).toBeGreaterThan(0);
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

  it("live parts go out before the event that follows them, however soon it follows", async () => {
    const { chatId, sse } = await startedChat();
    const chat = (await loadChat(db(), chatId))!;
    buffer.begin(chatId, chat.historyVersion, 1);
    buffer.append(chatId, { type: "text-delta", text: "a" });
    buffer.append(chatId, {
      type: "tool-call",
      tool_call_id: "c1",
      tool_name: "execute",
      args: {},
    });
    // The step's commit, at once: the parts, held for the next ones, must go out before it.
    await runTurn(chatId, () => feed);
    const events = await sse.until((es) =>
      ofType(es, "status").some((e) => (e.data as { status: string }).status === "waiting"),
    );
    const kinds = events.map((e) =>
      e.event === "part" ? `part ${(e.data as { seq: number }).seq}` : e.event,
    );
    const firstAfterUser = kinds.indexOf("message", kinds.indexOf("message") + 1);
    expect(kinds.slice(0, firstAfterUser)).toEqual(["message", "status", "part 0", "part 1"]);
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

describeDatabases("chat event stream: events held together", (db) => {
  it("events wait for the ones after them, and a status event takes them out at once", async () => {
    const feed = new MessageFeed();
    // A flush longer than the test: only a status event can send what the stream holds.
    const api = await startTestApi(db(), { feed, streamFlushMs: 60_000 });
    try {
      const url = await listening(api);
      const created = await api.request("POST", "/api/v1/chats", {
        token: api.memberToken,
        body: { message: "run true" },
      });
      const chatId = created.body.id as string;
      const sse = await openSse(url, `/api/v1/chats/${chatId}/stream`, api.memberToken);
      try {
        // The first refresh ends with the status: the user's message goes out with it.
        const first = await sse.until((es) => ofType(es, "status").length === 1);
        expect(first.map((e) => e.event)).toEqual(["message", "status"]);

        const workerId = randomUUID();
        const [claimed] = await acquire(db(), workerId, { leaseMs: 60_000, limit: 10 });
        expect(claimed?.chatId).toBe(chatId);
        const commit = (text: string, final = false): Promise<void> =>
          commitAsRunner(
            db(),
            chatId,
            workerId,
            claimed!.runnerId,
            [{ role: "assistant", visibility: "both", content: [{ type: "text", text }] }],
            { feed, final },
          );
        // A step's commit moves history, not the status: its message waits for what follows.
        await commit("thinking");
        await new Promise((r) => setTimeout(r, 300));
        expect(sse.events.map((e) => e.event)).toEqual(["message", "status"]);
        // The turn's end: the message held and the last one go out with the `waiting` status.
        await commit("done", true);
        const events = await sse.until((es) => ofType(es, "status").length === 2);
        expect(events.map((e) => e.event)).toEqual([
          "message",
          "status",
          "message",
          "message",
          "status",
        ]);
        expect(events.at(-1)!.data).toEqual({ status: "waiting", retrying: null });
      } finally {
        sse.close();
      }
    } finally {
      await api.app.close();
    }
  });
});

describeDatabases("chat event stream: a create's stream that cannot read the chat", (db) => {
  it("opens with the chat and says the stream lost the database; the chat is there", async () => {
    // The stream's first statement fails; everything else reaches the database.
    const failing = beforeEachQuery(db(), (sql) => {
      if (sql === CHAT_WITH_VISIBLE_MESSAGES_SQL) throw new Error("connection lost");
    });
    const api = await startTestApi(failing);
    try {
      const url = await listening(api);
      const sse = await openSse(url, "/api/v1/chats", api.memberToken, { message: "go" });
      try {
        expect(sse.status).toBe(201);
        const events = await sse.until((es) => ofType(es, "error").length === 1);
        expect(events.map((e) => e.event)).toEqual(["chat", "error"]);
        expect((events[1]!.data as { message: string }).message).toMatch(/after_id/);
        const id = (events[0]!.data as { id: string }).id;
        expect((await loadChat(db(), id))?.status).toBe("running");
      } finally {
        sse.close();
      }
    } finally {
      await api.app.close();
    }
  });
});

describeDatabases("chat event stream: a reader gone before the stream opens", (db) => {
  it("leaves no heartbeat behind", async () => {
    // The stream's first statement answers only once the reader has gone.
    let readerGone: () => void = () => {};
    const gone = new Promise<void>((r) => (readerGone = r));
    let reached: () => void = () => {};
    const reading = new Promise<void>((r) => (reached = r));
    const slow = beforeEachQuery(db(), async (sql) => {
      if (sql !== CHAT_WITH_VISIBLE_MESSAGES_SQL) return;
      reached();
      await gone;
    });
    const api = await startTestApi(slow);
    try {
      const url = await listening(api);
      const created = await api.request("POST", "/api/v1/chats", {
        token: api.memberToken,
        body: {},
      });
      // Every heartbeat interval set is cleared.
      const set = vi.spyOn(globalThis, "setInterval");
      const clear = vi.spyOn(globalThis, "clearInterval");
      const req = http.get(`${url}/api/v1/chats/${created.body.id as string}/stream`, {
        headers: { authorization: `Bearer ${api.memberToken}` },
        agent: false,
      });
      req.on("error", () => {});
      await reading; // the stream waits on its first statement
      req.destroy();
      await new Promise((r) => setTimeout(r, 200)); // the server sees the connection close
      readerGone();
      await new Promise((r) => setTimeout(r, 300));
      const heartbeats = set.mock.calls.flatMap((call, i) =>
        call[1] === SSE_HEARTBEAT_MS ? [set.mock.results[i]!.value as unknown] : [],
      );
      const cleared = new Set(clear.mock.calls.map((c) => c[0] as unknown));
      set.mockRestore();
      clear.mockRestore();
      expect(heartbeats).not.toEqual([]);
      expect(heartbeats.filter((h) => !cleared.has(h))).toEqual([]);
    } finally {
      await api.app.close();
    }
  });
});

describeDatabases("chat event stream: a create's stream on a replica that runs the chat", (db) => {
  it("follows the turn from the chat as created, with no read of it", async () => {
    const agent = await startTestAgent();
    const fake = await startFakeProvider();
    const r = recording(db());
    const buffer = new StreamBuffer();
    const feed = new MessageFeed();
    // In one process with the API, as a server's: the API's creates are claimed by its worker.
    const worker = testWorker(r.db, { buffer, feed, acquireIntervalMs: 60_000 });
    const api = await startTestApi(r.db, {
      buffer,
      feed,
      localClaim: (newChat) => worker.localClaim(newChat),
    });
    try {
      await worker.start();
      const url = await listening(api);
      const admin = { token: api.adminToken };
      const model = await api.request("POST", "/api/v1/models", {
        ...admin,
        body: { provider: "openai-compatible", model: "m", base_url: fake.url },
      });
      const workspace = await api.request("POST", "/api/v1/workspaces", {
        ...admin,
        body: { name: "w", agent_url: agent.url },
      });
      fake.script(
        { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }] },
        { text: "Done." },
      );
      r.statements.length = 0;
      const sse = await openSse(url, "/api/v1/chats", api.adminToken, {
        workspace_id: workspace.body.id,
        model_id: model.body.id,
        message: "run it",
      });
      try {
        expect(sse.status).toBe(201);
        const events = await sse.until((es) =>
          ofType(es, "status").some((e) => (e.data as { status: string }).status === "waiting"),
        );
        expect(events[0]!.event).toBe("chat");
        const chatId = (events[0]!.data as { id: string }).id;
        // Every message once, in order, as the chat holds them.
        const visible = await db().query<{ id: string }>(VISIBLE_MESSAGES_SQL, [chatId, "0"]);
        expect(ofType(events, "message").map((e) => e.id)).toEqual(visible.rows.map((m) => m.id));
        expect(ofType(events, "message").map((e) => (e.data as { role: string }).role)).toEqual([
          "user",
          "assistant",
          "tool",
          "assistant",
        ]);
        // The stream read neither the chat nor its messages: it started from the create's.
        expect(r.statements.filter((s) => s === CHAT_WITH_VISIBLE_MESSAGES_SQL)).toEqual([]);
      } finally {
        sse.close();
      }
    } finally {
      await api.app.close();
      await worker.stop();
      await fake.close();
      await agent.close();
    }
  });
});
