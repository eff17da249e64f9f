import { describe, expect, it } from "vitest";
import { ManualClock, parseChatId, toMessageId, type ChatId } from "../../contract/index.ts";
import { jsonAnswer } from "../answer.ts";
import { AGE_MARGIN_MS, ToolCallStore, type ToolCallKey } from "./store.ts";

const CHAT = parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")!;
const OTHER = parseChatId("11111111-2222-3333-4444-555555555555")!;
const HASH = Buffer.from("input-a");
const HASH_B = Buffer.from("input-b");

function key(message: number, id = "call_1", chatId: ChatId = CHAT): ToolCallKey {
  return { chatId, messageId: toMessageId(message)!, toolCallId: Buffer.from(id) };
}

/** A store that has been up for `uptimeMs`. */
function storeUp(uptimeMs = 60_000) {
  const clock = new ManualClock();
  const store = new ToolCallStore(clock);
  clock.advance(uptimeMs);
  return { clock, store };
}

describe("record store decisions", () => {
  it("no record runs", () => {
    const { store, clock } = storeUp();
    expect(store.beginRun(key(5), HASH, 0, clock.now()).kind).toBe("run");
  });

  it("a repeat replays the recorded answer, also a recorded failure", async () => {
    const { store, clock } = storeUp();
    const first = store.beginRun(key(5), HASH, 0, clock.now());
    if (first.kind !== "run") throw new Error("expected run");
    first.record.publish(jsonAnswer(500, { message: "The tool call handler failed." }));
    const again = store.beginRun(key(5), HASH, 0, clock.now());
    expect(again.kind).toBe("replay");
    if (again.kind !== "replay") return;
    expect(again.record).toBe(first.record);
    expect((await again.record.done).status).toBe(500);
  });

  it("a record ignores age", () => {
    const { store, clock } = storeUp(10_000);
    store.beginRun(key(5), HASH, 0, clock.now());
    // An age that alone would mean "agent started after the call".
    expect(store.beginRun(key(5), HASH, 9_999_999, clock.now()).kind).toBe("replay");
  });

  it("input mismatch is refused at once, even while the run is pending", () => {
    const { store, clock } = storeUp();
    store.beginRun(key(5), HASH, 0, clock.now());
    expect(store.beginRun(key(5), HASH_B, 0, clock.now())).toEqual({
      kind: "refused",
      code: "input_mismatch",
    });
  });

  it("stale message is refused before the age check", () => {
    const { store, clock } = storeUp(10_000);
    store.beginRun(key(7), HASH, 0, clock.now());
    // Age 9_999_999 would be refused as agent_started_after_tool_call; stale comes first.
    expect(store.beginRun(key(6), HASH, 9_999_999, clock.now())).toEqual({
      kind: "refused",
      code: "stale_tool_call",
    });
    expect(store.beginCancel(key(6), 0, clock.now())).toEqual({
      kind: "refused",
      code: "stale_tool_call",
    });
  });

  it("a sibling call in the latest message runs and keeps the others", () => {
    const { store, clock } = storeUp();
    store.beginRun(key(5, "a"), HASH, 0, clock.now());
    expect(store.beginRun(key(5, "b"), HASH, 0, clock.now()).kind).toBe("run");
    expect(store.current(key(5, "a"))).toBe(true);
    expect(store.current(key(5, "b"))).toBe(true);
  });

  it("the same provider ID in a newer message runs and drops the older message's records", () => {
    const { store, clock } = storeUp();
    store.beginRun(key(5, "call_1"), HASH, 0, clock.now());
    store.beginRun(key(5, "call_2"), HASH, 0, clock.now());
    expect(store.beginRun(key(9, "call_1"), HASH, 0, clock.now()).kind).toBe("run");
    expect(store.current(key(5, "call_1"))).toBe(false);
    expect(store.current(key(5, "call_2"))).toBe(false);
    expect(store.beginRun(key(5, "call_2"), HASH, 0, clock.now()).kind).toBe("refused");
  });

  it("agent started after the call: at 10 s uptime 8000 ms is refused and 7999 ms runs", () => {
    const { store, clock } = storeUp(10_000);
    expect(AGE_MARGIN_MS).toBe(2_000);
    expect(store.beginRun(key(5, "a"), HASH, 8000, clock.now())).toEqual({
      kind: "refused",
      code: "agent_started_after_tool_call",
    });
    expect(store.beginRun(key(5, "b"), HASH, 7999, clock.now()).kind).toBe("run");
  });

  it("the largest age is refused without overflow", () => {
    const { store, clock } = storeUp(10_000);
    expect(store.beginRun(key(5), HASH, 9223372036854, clock.now()).kind).toBe("refused");
    expect(store.beginRun(key(5), HASH, Number.MAX_SAFE_INTEGER, clock.now()).kind).toBe("refused");
  });

  it("a negative age counts as 0", () => {
    const young = storeUp(1_000); // uptime below the margin: even age 0 is refused
    expect(young.store.beginRun(key(5), HASH, -5_000, young.clock.now()).kind).toBe("refused");
    const old = storeUp(10_000);
    expect(old.store.beginRun(key(5), HASH, -5_000, old.clock.now()).kind).toBe("run");
  });

  it("a refusal drops nothing", () => {
    const { store, clock } = storeUp(10_000);
    store.beginRun(key(5), HASH, 0, clock.now());
    store.beginRun(key(9), HASH, 9_000, clock.now()); // newer message, refused by age
    expect(store.current(key(5))).toBe(true);
    store.beginRun(key(5), HASH_B, 0, clock.now()); // input mismatch
    expect(store.current(key(5))).toBe(true);
    expect(store.beginRun(key(5), HASH, 0, clock.now()).kind).toBe("replay");
  });

  it("chats are independent", () => {
    const { store, clock } = storeUp();
    store.beginRun(key(9, "x", CHAT), HASH, 0, clock.now());
    expect(store.beginRun(key(5, "x", OTHER), HASH, 0, clock.now()).kind).toBe("run");
    expect(store.current(key(9, "x", CHAT))).toBe(true);
    expect(store.chatCount).toBe(2);
  });

  it("the decision uses the instant the request entered", () => {
    const { store, clock } = storeUp(9_000);
    const entered = clock.now();
    clock.advance(5_000); // the body took long to arrive
    expect(store.beginRun(key(5), HASH, 7_000, entered).kind).toBe("refused");
  });

  it("a new record's createdAt is the instant the request entered", () => {
    const { store, clock } = storeUp();
    const entered = clock.now();
    clock.advance(300);
    const d = store.beginRun(key(5), HASH, 0, entered);
    expect(d.kind === "run" && d.record.createdAt).toBe(entered);
  });

  it("a record is keyed by the exact ID bytes", () => {
    const { store, clock } = storeUp();
    const a = { ...key(5), toolCallId: Buffer.from([0xff]) };
    const b = { ...key(5), toolCallId: Buffer.from([0xfe]) };
    store.beginRun(a, HASH, 0, clock.now());
    expect(store.beginRun(b, HASH, 0, clock.now()).kind).toBe("run");
  });
});

describe("record store cancel decisions", () => {
  it("never received: records the call as canceled, and a later start is refused", () => {
    const { store, clock } = storeUp();
    expect(store.beginCancel(key(5), 0, clock.now())).toEqual({ kind: "never_started" });
    expect(store.beginRun(key(5), HASH, 0, clock.now())).toEqual({
      kind: "refused",
      code: "tool_call_canceled",
    });
    expect(store.beginCancel(key(5), 0, clock.now())).toEqual({ kind: "never_started" });
  });

  it("tool_call_canceled comes before the input comparison", () => {
    const { store, clock } = storeUp();
    store.beginCancel(key(5), 0, clock.now());
    expect(store.beginRun(key(5), HASH_B, 0, clock.now())).toEqual({
      kind: "refused",
      code: "tool_call_canceled",
    });
  });

  it("a started call is found", () => {
    const { store, clock } = storeUp();
    const run = store.beginRun(key(5), HASH, 0, clock.now());
    const c = store.beginCancel(key(5), 0, clock.now());
    expect(c.kind === "started" && run.kind === "run" && c.record === run.record).toBe(true);
  });

  it("agent restarted: cancel is refused with agent_started_after_tool_call", () => {
    const { store, clock } = storeUp(10_000);
    expect(store.beginCancel(key(5), 8_000, clock.now())).toEqual({
      kind: "refused",
      code: "agent_started_after_tool_call",
    });
    expect(store.chatCount).toBe(0);
  });
});
