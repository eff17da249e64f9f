import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { registerReplica } from "../chatd/replicas.ts";
import { StreamBuffer, type PartEvent } from "../chatd/stream.ts";
import { MessageFeed } from "../chatd/message-feed.ts";
import {
  abandon,
  acquire,
  commitFinalStep,
  commitStep,
  HeldChat,
  loadChat,
} from "../chatd/transitions/index.ts";
import { realClock } from "../contract/index.ts";
import { createApi } from "./app.ts";
import { PartCursor } from "./relay.ts";
import { openSse, startTestApi, type SseEvent, type SseReader } from "./test-support.ts";

const part = (hv: string, attempt: number, seq: number): PartEvent => ({
  history_version: hv,
  generation_attempt: attempt,
  seq,
  part: { type: "text-delta", text: `${hv}/${attempt}/${seq}` },
});

describe("PartCursor", () => {
  it("admits each part once, in order: a replayed episode passes only its new parts", () => {
    const c = new PartCursor();
    expect([0, 1, 2].map((s) => c.admit(part("5", 1, s)))).toEqual([true, true, true]);
    expect([0, 1, 2, 3].map((s) => c.admit(part("5", 1, s)))).toEqual([false, false, false, true]);
  });

  it("a part of an episode older than one already sent is stale", () => {
    const c = new PartCursor();
    expect(c.admit(part("5", 2, 0))).toBe(true);
    expect(c.admit(part("5", 1, 7))).toBe(false);
    expect(c.admit(part("4", 9, 9))).toBe(false);
    expect(c.admit(part("6", 1, 0))).toBe(true);
  });

  it("history versions compare as numbers, not strings", () => {
    const c = new PartCursor();
    expect(c.admit(part("9", 1, 0))).toBe(true);
    expect(c.admit(part("10", 1, 0))).toBe(true);
  });

  it("the floor from the chat row drops earlier episodes and keeps the current one whole", () => {
    const c = new PartCursor();
    c.floor("7", 2);
    expect(c.admit(part("7", 1, 3))).toBe(false);
    expect(c.admit(part("6", 5, 0))).toBe(false);
    expect(c.admit(part("7", 2, 0))).toBe(true);
    c.floor("7", 2); // a later read of the same state moves nothing back
    expect(c.admit(part("7", 2, 0))).toBe(false);
    expect(c.admit(part("7", 2, 1))).toBe(true);
  });
});

describeDatabases("live parts relay", (db) => {
  const apps: FastifyInstance[] = [];
  const readers: SseReader[] = [];
  afterEach(async () => {
    for (const r of readers.splice(0)) r.close();
    for (const a of apps.splice(0)) await a.close();
  });
  const secret = "test-replica-secret";

  /** Another replica: only its buffer, feed and internal route matter here; registered at its URL. */
  const replica = async (
    workerId: string,
    buffer: StreamBuffer,
    feed = new MessageFeed(),
  ): Promise<FastifyInstance> => {
    const app = await createApi({ db: db(), buffer, feed, replica: { workerId, secret } });
    apps.push(app);
    await registerReplica(db(), workerId, await app.listen({ host: "127.0.0.1", port: 0 }));
    return app;
  };

  /** The replica under test, listening, with a chat created on it: the stream's side. */
  const streamingReplica = async (workerId = randomUUID()) => {
    const api = await startTestApi(db(), { replica: { workerId, secret } });
    apps.push(api.app);
    await api.app.listen({ host: "127.0.0.1", port: 0 });
    const baseUrl = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
    const created = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { message: "hi" },
    });
    return { api, baseUrl, chatId: created.body.id as string };
  };

  const texts = (events: SseEvent[]) =>
    events
      .filter((e) => e.event === "part")
      .map((e) => {
        const p = (e.data as PartEvent).part;
        return p.type === "text-delta" ? p.text : "";
      });

  it("a stream on a replica that does not own the chat relays the owner's parts once each, through the owner's restart and on to a new owner", async () => {
    const self = randomUUID();
    const { api, baseUrl, chatId } = await streamingReplica(self);

    const ownerId = randomUUID();
    const ownerBuffer = new StreamBuffer();
    let owner = await replica(ownerId, ownerBuffer);
    const [claim] = await acquire(db(), ownerId, { leaseMs: 60_000, limit: 10 });
    expect(claim?.chatId).toBe(chatId);
    const hv = (await loadChat(db(), chatId))!.historyVersion;
    ownerBuffer.begin(chatId, hv, 1);
    ownerBuffer.append(chatId, { type: "text-delta", text: "a" });

    const sse = await openSse(baseUrl, `/api/v1/chats/${chatId}/stream`, api.memberToken);
    readers.push(sse);
    await sse.until((es) => texts(es).length === 1);
    ownerBuffer.append(chatId, { type: "text-delta", text: "b" });
    await sse.until((es) => texts(es).length === 2);

    // The owner's API goes away and comes back at another address with the same buffer: the
    // relay connects again, the episode is replayed from its start, and only "c" is new.
    await owner.close();
    apps.splice(apps.indexOf(owner), 1);
    owner = await replica(ownerId, ownerBuffer);
    ownerBuffer.append(chatId, { type: "text-delta", text: "c" });
    await sse.until((es) => texts(es).length === 3);

    // The chat moves to another replica, which starts a new attempt: the stream follows it.
    const nextId = randomUUID();
    const nextBuffer = new StreamBuffer();
    await replica(nextId, nextBuffer);
    await abandon(db(), chatId, ownerId, claim!.runnerId);
    await acquire(db(), nextId, { leaseMs: 60_000, limit: 10 });
    nextBuffer.begin(chatId, hv, 2);
    nextBuffer.append(chatId, { type: "text-delta", text: "d" });
    const events = await sse.until((es) => texts(es).length === 4);
    // The replica that lost the chat has nothing more to say to this stream.
    ownerBuffer.append(chatId, { type: "text-delta", text: "stale" });
    nextBuffer.append(chatId, { type: "text-delta", text: "e" });
    const after = await sse.until((es) => texts(es).length >= 5);

    expect(texts(after)).toEqual(["a", "b", "c", "d", "e"]);
    expect(
      events
        .filter((e) => e.event === "part")
        .map((e) => [(e.data as PartEvent).generation_attempt, (e.data as PartEvent).seq]),
    ).toEqual([
      [1, 0],
      [1, 1],
      [1, 2],
      [2, 0],
    ]);
  });

  it("the owner's fenced writes, which notify nobody, reach a stream on another replica through the relay, and a reconnect shows what it missed", async () => {
    const { api, baseUrl, chatId } = await streamingReplica();
    const ownerId = randomUUID();
    const ownerBuffer = new StreamBuffer();
    const ownerFeed = new MessageFeed();
    let owner = await replica(ownerId, ownerBuffer, ownerFeed);
    const [claim] = await acquire(db(), ownerId, { leaseMs: 60_000, limit: 10 });
    const fenceAt = async () => ({
      chatId,
      workerId: ownerId,
      runnerId: claim!.runnerId,
      status: "running" as const,
      historyVersion: (await loadChat(db(), chatId))!.historyVersion,
    });
    const answer = (text: string) => [
      {
        role: "assistant" as const,
        visibility: "both" as const,
        content: [{ type: "text" as const, text }],
      },
    ];
    const said = (es: SseEvent[]) =>
      es
        .filter((e) => e.event === "message")
        .map((e) => (e.data as { parts: { text?: string }[] }).parts[0]?.text);

    const sse = await openSse(baseUrl, `/api/v1/chats/${chatId}/stream`, api.memberToken);
    readers.push(sse);
    // The relay is connected once the owner's live part comes through it.
    ownerBuffer.begin(chatId, (await loadChat(db(), chatId))!.historyVersion, 1);
    ownerBuffer.append(chatId, { type: "text-delta", text: "a" });
    await sse.until((es) => texts(es).length === 1);

    // A step committed by the owner's runner: told to its feed, and on through the relay.
    await commitStep(
      db(),
      await fenceAt(),
      answer("one"),
      new HeldChat(realClock, 2_000, ownerFeed),
    );
    await sse.until((es) => said(es).includes("one"));

    // A step committed while no relay hears it (a feed nobody follows, as before a connection):
    // the owner comes back at another address, and the relay's new connection shows it.
    await commitStep(
      db(),
      await fenceAt(),
      answer("two"),
      new HeldChat(realClock, 2_000, new MessageFeed()),
    );
    await owner.close();
    apps.splice(apps.indexOf(owner), 1);
    owner = await replica(ownerId, ownerBuffer, ownerFeed);
    await sse.until((es) => said(es).includes("two"));

    // The turn's end, which lets the chat go (a runner holding the chat ends it in the same
    // statement): the stream shows the answer and `waiting`.
    const held = new HeldChat(realClock, 2_000, ownerFeed);
    held.read((await loadChat(db(), chatId))!);
    await commitFinalStep(db(), await fenceAt(), answer("three"), held);
    expect((await loadChat(db(), chatId))!.status).toBe("waiting");
    const events = await sse.until((es) =>
      es.some((e) => e.event === "status" && (e.data as { status: string }).status === "waiting"),
    );
    expect(said(events)).toEqual(["hi", "one", "two", "three"]);
    expect(events.filter((e) => e.event === "error")).toEqual([]);
  });

  it("a stream whose relay cannot reach the owner still shows what the owner commits, read at each retry", async () => {
    const { api, baseUrl, chatId } = await streamingReplica();
    // The owner is registered at an address where nothing answers (a partition between replicas
    // that both reach the database).
    const ownerId = randomUUID();
    const gone = await createApi({ db: db(), buffer: new StreamBuffer() });
    const port = (await gone.listen({ host: "127.0.0.1", port: 0 })).split(":").pop();
    await gone.close();
    await registerReplica(db(), ownerId, `http://127.0.0.1:${port}`);
    const [claim] = await acquire(db(), ownerId, { leaseMs: 60_000, limit: 10 });
    const sse = await openSse(baseUrl, `/api/v1/chats/${chatId}/stream`, api.memberToken);
    readers.push(sse);
    await sse.until((es) => es.some((e) => e.event === "status"));
    const fence = {
      chatId,
      workerId: ownerId,
      runnerId: claim!.runnerId,
      status: "running" as const,
      historyVersion: (await loadChat(db(), chatId))!.historyVersion,
    };
    await commitStep(
      db(),
      fence,
      [{ role: "assistant", visibility: "both", content: [{ type: "text", text: "unrelayed" }] }],
      new HeldChat(realClock, 2_000, new MessageFeed()),
    );
    const events = await sse.until((es) =>
      es.some(
        (e) =>
          e.event === "message" &&
          (e.data as { parts: { text?: string }[] }).parts[0]?.text === "unrelayed",
      ),
    );
    expect(events.filter((e) => e.event === "error")).toEqual([]);
  });
});
