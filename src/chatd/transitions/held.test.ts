import { describe, expect, it } from "vitest";
import { ManualClock } from "../../contract/index.ts";
import type { Chat, Fence } from "../chats.ts";
import { HELD_CHAT_MS, HeldChat } from "./held.ts";

const chat = (snapshotVersion: number, o: Partial<Chat> = {}): Chat => ({
  id: "c1",
  ownerId: "u1",
  workspaceId: null,
  modelConfigId: null,
  title: "",
  status: "running",
  archived: false,
  workerId: "w1",
  runnerId: "r1",
  snapshotVersion: String(snapshotVersion),
  historyVersion: "4",
  queueVersion: "0",
  generationAttempt: 0,
  retryState: null,
  lastError: null,
  compactRequested: false,
  createdAt: new Date(0),
  updatedAt: new Date(0),
  ...o,
});
const fence: Fence = {
  chatId: "c1",
  workerId: "w1",
  runnerId: "r1",
  status: "running",
  historyVersion: "4",
};
const change = (v: number) => ({
  chat_id: "c1",
  snapshot_version: String(v),
  history_version: "4",
  status: "running" as const,
  runner_id: "r1",
});

describe("HeldChat", () => {
  it("answers the attempt its last write recorded once, and never after a change", () => {
    const clock = new ManualClock();
    const held = new HeldChat(clock);
    held.read(chat(5));
    held.wrote({ chat: chat(6, { generationAttempt: 1 }), messages: [], also: {} }, true);
    expect(held.takeAttempt(fence)).toBe(1);
    expect(held.takeAttempt(fence)).toBeUndefined();
    // Recorded, then a foreign change is announced: the model call writes its own attempt.
    held.wrote({ chat: chat(7, { generationAttempt: 1 }), messages: [], also: {} }, true);
    held.changed(change(8));
    expect(held.takeAttempt(fence)).toBeUndefined();
    // Recorded, then the chat is read again, or held too long: the same.
    held.read(chat(9));
    held.wrote({ chat: chat(10, { generationAttempt: 1 }), messages: [], also: {} }, true);
    held.read(chat(10, { generationAttempt: 1 }));
    expect(held.takeAttempt(fence)).toBeUndefined();
    held.wrote({ chat: chat(11, { generationAttempt: 1 }), messages: [], also: {} }, true);
    clock.advance(HELD_CHAT_MS + 1);
    expect(held.takeAttempt(fence)).toBeUndefined();
  });

  it("a notification of its own write, or an older one, arriving late is no news", () => {
    const held = new HeldChat(new ManualClock());
    held.read(chat(5));
    held.wrote({ chat: chat(6), messages: [], also: {} });
    expect(held.isNews(change(5))).toBe(false);
    expect(held.isNews(change(6))).toBe(false);
    expect(held.isNews(change(7))).toBe(true);
    // Dropping what is held forgets nothing of what was seen.
    held.drop();
    expect(held.isNews(change(6))).toBe(false);
  });
});

describe("HeldChat's claim and batch start", () => {
  const usable = { status: "usable" } as const;
  const start = { history: [], snapshot: null, access: usable, organization: "rules" };

  it("answers what the claim read while the claimed row is held, and its attempt once", () => {
    const clock = new ManualClock();
    const held = new HeldChat(clock);
    const claimed = chat(5, { generationAttempt: 1 });
    held.claimed(claimed, start);
    expect(held.snapshot).toBeNull(); // the claim found none kept
    expect(held.snapshotInputs()).toMatchObject({ access: usable, organization: "rules" });
    expect(held.takeAttempt(fence)).toBe(1);
    expect(held.takeAttempt(fence)).toBeUndefined();
    // A write since: the inputs are of the claim's moment, no longer answered.
    held.wrote({ chat: chat(6), messages: [], also: {} });
    expect(held.snapshotInputs()).toBeUndefined();
    // An interrupting chat's claim counts no attempt.
    const other = new HeldChat(clock);
    other.claimed(chat(5, { status: "interrupting" }), start);
    expect(other.takeAttempt({ ...fence, status: "interrupting" })).toBeUndefined();
  });

  it("answers a batch start that rode on the calls' commit once, for that message, while recent", () => {
    const clock = new ManualClock();
    const held = new HeldChat(clock);
    held.read(chat(5));
    held.startedBatch("m9", usable, true);
    clock.advance(30);
    expect(held.takeBatchStart("m8")).toBeUndefined(); // another message's: and it is gone
    expect(held.takeBatchStart("m9")).toBeUndefined();
    held.startedBatch("m9", usable, true);
    clock.advance(30);
    held.drop(); // the audit entries it wrote are for this batch's send: kept through a drop
    expect(held.takeBatchStart("m9")).toEqual({ access: usable, audit: true, ageMs: 30 });
    expect(held.takeBatchStart("m9")).toBeUndefined();
    held.startedBatch("m10", usable, false);
    clock.advance(HELD_CHAT_MS + 1);
    expect(held.takeBatchStart("m10")).toBeUndefined(); // too old: started again
  });
});
