// A chat's event stream on a replica that does not own the chat: it relays the owner's live
// parts and sends the committed messages, and when the owner dies it keeps the client's
// connection and goes on with the new owner's parts and messages, none of them twice.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSse, type SseEvent, type SseReader } from "../../src/api/test-support.ts";
import type { PartEvent } from "../../src/chatd/stream.ts";
import { testDatabaseUrl } from "../support/db.ts";
import { startCluster, waitFor, type Cluster } from "../support/replicas.ts";

const skip = testDatabaseUrl() === undefined;
if (skip) {
  console.warn(
    "TETHER_TEST_DATABASE_URL is not set: the replica tests need a Postgres server and are skipped " +
      "(e.g. TETHER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test).",
  );
}

const words = (prefix: string, n: number): string =>
  Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(" ");

const parts = (events: SseEvent[]): PartEvent[] =>
  events.filter((e) => e.event === "part").map((e) => e.data as PartEvent);

const textOf = (ps: PartEvent[], attempt: number): string =>
  ps
    .filter((p) => p.generation_attempt === attempt && p.part.type === "text-delta")
    .map((p) => (p.part.type === "text-delta" ? p.part.text : ""))
    .join("");

const messages = (events: SseEvent[]) =>
  events
    .filter((e) => e.event === "message")
    .map((e) => e.data as { role: string; parts: { type: string; text?: string }[] });

describe.skipIf(skip)("event stream across replicas", () => {
  let cluster: Cluster;
  const readers: SseReader[] = [];
  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);
  afterAll(async () => {
    for (const r of readers) r.close();
    await cluster?.close();
  }, 60_000);

  it("a stream on a replica that does not own the chat shows the owner's live parts and the committed messages, and after SIGKILL of the owner goes on with the new owner's", async () => {
    const replicas = await cluster.startReplicas(3);
    // The first owner streams part of its answer and then hears nothing more, so it is always
    // mid-answer when it is killed, however slow the machine; the new owner answers again.
    const first = words("slow", 60);
    const second = words("again", 15);
    let calls = 0;
    cluster.fake.respond(() =>
      ++calls === 1
        ? { text: first, delayMs: 30, hangAfterChunks: 20 }
        : { text: second, delayMs: 80 },
    );
    const chatId = await cluster.createChat(replicas[0]!, "tell me");
    const ownerId = await waitFor("an owner", () => cluster.owner(chatId));
    const owner = replicas.find((r) => r.workerId === ownerId)!;
    const others = replicas.filter((r) => r !== owner);
    // One stream on each replica that does not own the chat: whichever of them takes it over,
    // the other one relays from the new owner.
    const streams = await Promise.all(
      others.map((r) => openSse(r.url, `/api/v1/chats/${chatId}/stream`, cluster.token())),
    );
    readers.push(...streams);
    for (const s of streams) expect(s.status).toBe(200);

    // Live parts of the first owner's attempt, relayed, after the committed user message.
    for (const s of streams) {
      await s.until(
        (es) => parts(es).filter((p) => p.generation_attempt === 1).length >= 5,
        15_000,
      );
      expect(messages(s.events)).toEqual([
        expect.objectContaining({ role: "user", parts: [{ type: "text", text: "tell me" }] }),
      ]);
    }
    expect(calls).toBe(1);

    await owner.stop("SIGKILL");
    const newOwnerId = await waitFor(
      "a new owner",
      async () => {
        const o = await cluster.owner(chatId);
        return o !== null && o !== ownerId ? o : undefined;
      },
      20_000,
    );
    expect(others.map((r) => r.workerId)).toContain(newOwnerId);

    for (const s of streams) {
      // The new owner's writes notify nobody: the stream on the other replica hears them through
      // its relay, up to the end of the turn.
      const events = await s.until(
        (es) =>
          messages(es).some((m) => m.role === "assistant") &&
          es.some(
            (e) => e.event === "status" && (e.data as { status: string }).status === "waiting",
          ),
        20_000,
      );
      expect(events.filter((e) => e.event === "error")).toEqual([]);
      const ps = parts(events);
      // Each part once, each episode's parts in order from its first.
      const keys = ps.map((p) => `${p.history_version}/${p.generation_attempt}/${p.seq}`);
      expect(new Set(keys).size).toBe(keys.length);
      for (const attempt of [1, 2]) {
        const seqs = ps.filter((p) => p.generation_attempt === attempt).map((p) => p.seq);
        expect(seqs).toEqual(seqs.map((_, i) => i));
      }
      expect(ps.map((p) => p.generation_attempt)).toEqual(
        [...ps.map((p) => p.generation_attempt)].sort((a, b) => a - b),
      );
      // The first owner's words up to its death, then the new owner's whole answer.
      expect(first.startsWith(textOf(ps, 1))).toBe(true);
      expect(textOf(ps, 1).length).toBeLessThan(first.length);
      expect(textOf(ps, 2)).toBe(second);
      expect(messages(events).at(-1)).toEqual(
        expect.objectContaining({ role: "assistant", parts: [{ type: "text", text: second }] }),
      );
    }
    expect(calls).toBe(2);
    await Promise.all(others.map((r) => r.stop("SIGTERM")));
  }, 120_000);
});
