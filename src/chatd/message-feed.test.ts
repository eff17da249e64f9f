import { describe, expect, it } from "vitest";
import { ManualClock } from "../contract/index.ts";
import { FEED_ENTRIES_PER_CHAT, FEED_MS, MessageFeed, type HistoryMove } from "./message-feed.ts";
import type { ChatMessage } from "./messages.ts";
import { testMessage } from "../../test/support/messages.ts";

const message = (id: string): ChatMessage =>
  testMessage({ id, content: [{ type: "text", text: id }] });

const move = (before: number, after: number): HistoryMove => ({
  before: String(before),
  after: String(after),
  messages: [message(String(after))],
});

describe("MessageFeed", () => {
  it("holds a chat's commits only while a stream here follows it", () => {
    const feed = new MessageFeed(new ManualClock());
    feed.publish("chat", move(1, 2));
    expect(feed.from("chat", 1n)).toBeUndefined();
    const unwatch = feed.watch("chat");
    const again = feed.watch("chat");
    feed.publish("chat", move(2, 3));
    expect(feed.from("chat", 2n)?.after).toBe(3n);
    expect(feed.from("other", 2n)).toBeUndefined();
    unwatch();
    unwatch(); // once only: the other stream still follows
    expect(feed.from("chat", 2n)?.after).toBe(3n);
    again();
    expect(feed.from("chat", 2n)).toBeUndefined();
    expect(feed.size).toBe(0);
  });

  it("holds at most a few commits per chat, none older than FEED_MS", () => {
    const clock = new ManualClock();
    const feed = new MessageFeed(clock);
    feed.watch("chat");
    for (let v = 1; v <= FEED_ENTRIES_PER_CHAT + 2; v++) feed.publish("chat", move(v, v + 1));
    expect(feed.size).toBe(FEED_ENTRIES_PER_CHAT);
    expect(feed.from("chat", 1n)).toBeUndefined();
    expect(feed.from("chat", BigInt(FEED_ENTRIES_PER_CHAT + 2))).toBeDefined();
    clock.advance(FEED_MS + 1);
    expect(feed.from("chat", BigInt(FEED_ENTRIES_PER_CHAT + 2))).toBeUndefined();
    expect(feed.size).toBe(0);
  });

  it("keeps no commit that moved nothing", () => {
    const feed = new MessageFeed(new ManualClock());
    feed.watch("chat");
    feed.publish("chat", { before: "3", after: "3", messages: [message("1")] });
    feed.publish("chat", { before: "3", after: "4", messages: [] });
    expect(feed.size).toBe(0);
  });

  it("a commit under way is settled once each one announced ends, published or not", async () => {
    const feed = new MessageFeed(new ManualClock());
    feed.watch("chat");
    expect(feed.settled("chat")).toBeUndefined();
    const first = feed.committing("chat");
    const second = feed.committing("chat");
    const settled = feed.settled("chat")!;
    let done = false;
    void settled.then(() => (done = true));
    first(move(1, 2));
    first(move(5, 6)); // a second end of the same commit does nothing
    await Promise.resolve();
    expect(done).toBe(false);
    expect(feed.from("chat", 5n)).toBeUndefined();
    second();
    await settled;
    expect(done).toBe(true);
    expect(feed.settled("chat")).toBeUndefined();
    expect(feed.from("chat", 1n)?.messages.map((m) => m.id)).toEqual(["2"]);
  });
});
