import type { LanguageModelV3, LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../contract/index.ts";
import { createDemoModel, type StepPart } from "../model/index.ts";
import type { ContextSnapshot } from "./prompt/index.ts";
import {
  RECENT_SNAPSHOT_MS,
  RecentSnapshots,
  sameJson,
  STEP_AHEAD_MAX_AGE_MS,
  StepAhead,
  type ModelRequest,
} from "./step-ahead.ts";

/** The demo model, recording each call; `hang`: its answer never comes until the call aborts. */
function recordingModel(o: { hang?: boolean } = {}): {
  model: LanguageModelV3;
  calls: LanguageModelV3CallOptions[];
} {
  const demo = createDemoModel();
  const calls: LanguageModelV3CallOptions[] = [];
  const model: LanguageModelV3 = {
    ...demo,
    doStream: async (call) => {
      calls.push(call);
      if (!o.hang) return demo.doStream(call);
      return {
        stream: new ReadableStream({
          start(c) {
            call.abortSignal?.addEventListener("abort", () => c.error(call.abortSignal!.reason));
          },
        }),
      };
    },
  };
  return { model, calls };
}

const request = (text: string): ModelRequest => ({
  system: "You are a test.",
  messages: [{ role: "user", content: text }],
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function read(parts: AsyncIterable<StepPart>): Promise<StepPart[]> {
  const out: StepPart[] = [];
  for await (const p of parts) out.push(p);
  return out;
}

describe("a model step sent ahead", () => {
  it("sends its request at once; the task that sends the same request takes its answer", async () => {
    const { model, calls } = recordingModel();
    const clock = new ManualClock(1234);
    const ahead = new StepAhead(model, request("hello"), clock);
    // Sent before anyone takes it.
    await until(() => calls.length === 1);
    const parts = ahead.take(model, request("hello"), new AbortController().signal);
    expect(parts).toBeDefined();
    const got = await read(parts!);
    expect(got.at(-1)?.type).toBe("finish");
    expect(got.some((p) => p.type === "text-delta")).toBe(true);
    expect(calls).toHaveLength(1);
    // Taken: its age no longer matters.
    clock.advance(STEP_AHEAD_MAX_AGE_MS);
    expect(calls[0]!.abortSignal!.aborted).toBe(false);
    // Taken once: a second task gets nothing, and dropping it now stops nothing.
    expect(ahead.take(model, request("hello"), new AbortController().signal)).toBeUndefined();
    ahead.drop();
    expect(calls[0]!.abortSignal!.aborted).toBe(false);
  });

  it("a task that sends another request, or to another model, drops it: its request is aborted", async () => {
    for (const other of ["request", "model"] as const) {
      const { model, calls } = recordingModel({ hang: true });
      const ahead = new StepAhead(model, request("hello"), new ManualClock());
      await until(() => calls.length === 1);
      const taker = other === "model" ? recordingModel().model : model;
      const asked = other === "request" ? request("hello again") : request("hello");
      expect(ahead.take(taker, asked, new AbortController().signal)).toBeUndefined();
      expect(calls[0]!.abortSignal!.aborted).toBe(true);
    }
  });

  it("is taken by an equal request built anew, and dropped for one byte of a long history", async () => {
    const history = (last: string): ModelRequest => ({
      system: "You are a test.",
      messages: Array.from({ length: 200 }, (_, i) => ({
        role: "tool" as const,
        content: [
          {
            type: "tool-result" as const,
            toolCallId: `call_${i}`,
            toolName: "execute",
            output: { type: "text" as const, value: i === 199 ? last : `output ${i}\n`.repeat(50) },
          },
        ],
      })),
    });
    for (const [asked, taken] of [
      ["the end", true],
      ["the enD", false],
    ] as const) {
      const { model, calls } = recordingModel({ hang: !taken });
      const ahead = new StepAhead(model, history("the end"), new ManualClock());
      await until(() => calls.length === 1);
      const parts = ahead.take(model, history(asked), new AbortController().signal);
      expect(parts !== undefined).toBe(taken);
      if (parts) expect((await read(parts)).at(-1)?.type).toBe("finish");
      else expect(calls[0]!.abortSignal!.aborted).toBe(true);
    }
  });

  it("a step nobody takes is aborted when dropped", async () => {
    const { model, calls } = recordingModel({ hang: true });
    const ahead = new StepAhead(model, request("hello"), new ManualClock());
    await until(() => calls.length === 1);
    ahead.drop();
    expect(calls[0]!.abortSignal!.aborted).toBe(true);
    expect(ahead.take(model, request("hello"), new AbortController().signal)).toBeUndefined();
  });

  it("a step nobody takes within its age is dropped", async () => {
    const { model, calls } = recordingModel({ hang: true });
    const clock = new ManualClock();
    const ahead = new StepAhead(model, request("hello"), clock);
    await until(() => calls.length === 1);
    clock.advance(STEP_AHEAD_MAX_AGE_MS - 1);
    expect(calls[0]!.abortSignal!.aborted).toBe(false);
    clock.advance(1);
    expect(calls[0]!.abortSignal!.aborted).toBe(true);
    expect(ahead.take(model, request("hello"), new AbortController().signal)).toBeUndefined();
  });

  it("a taken step stops with the signal of the task that took it", async () => {
    const { model, calls } = recordingModel({ hang: true });
    const ahead = new StepAhead(model, request("hello"), new ManualClock());
    const task = new AbortController();
    const parts = ahead.take(model, request("hello"), task.signal)!;
    const reading = read(parts);
    await until(() => calls.length === 1);
    task.abort(new Error("stale task"));
    await expect(reading).rejects.toThrow("stale task");
    expect(calls[0]!.abortSignal!.aborted).toBe(true);
  });
});

describe("the snapshots a replica sent each model last", () => {
  const snapshot = (dir: string): ContextSnapshot => ({
    environment: null,
    files: [],
    organization: null,
    note: dir,
  });

  it("are recalled for the model they were sent to only, the least recent forgotten first", () => {
    const a = createDemoModel();
    const b = createDemoModel();
    const recent = new RecentSnapshots(new ManualClock(), { max: 2 });
    recent.remember(a, "w1", snapshot("1"));
    recent.remember(a, "w2", snapshot("2"));
    expect(recent.recall(a, "w1")?.note).toBe("1");
    expect(recent.recall(b, "w1")).toBeUndefined();
    // w1 was remembered again last (sent to b now): w2 goes when a third comes.
    recent.remember(b, "w1", snapshot("1b"));
    recent.remember(a, "w3", snapshot("3"));
    expect(recent.recall(a, "w2")).toBeUndefined();
    expect(recent.recall(a, "w1")).toBeUndefined();
    expect(recent.recall(b, "w1")?.note).toBe("1b");
    expect(recent.recall(a, "w3")?.note).toBe("3");
  });

  it("are recalled for a minute", () => {
    const a = createDemoModel();
    const clock = new ManualClock();
    const recent = new RecentSnapshots(clock);
    recent.remember(a, "w1", snapshot("1"));
    clock.advance(RECENT_SNAPSHOT_MS);
    expect(recent.recall(a, "w1")?.note).toBe("1");
    clock.advance(1);
    expect(recent.recall(a, "w1")).toBeUndefined();
  });
});

describe("sameJson", () => {
  type Obj = Record<string, unknown>;
  const base = (): Obj => ({
    role: "assistant",
    content: [
      { type: "text", text: "ok", providerOptions: undefined },
      { type: "tool-call", toolCallId: "c1", toolName: "execute", input: { command: "ls", n: 1 } },
    ],
    at: new Date(0),
  });
  const parts = (v: Obj) => v.content as Obj[];
  const input = (v: Obj) => parts(v)[1]!.input as Obj;
  /** Single changes of a leaf, key or element of base(). */
  const changes: ((v: Obj) => void)[] = [
    (v) => (v.role = "user"),
    (v) => (parts(v)[0]!.text = "ok "),
    (v) => (input(v).n = 2),
    (v) => (input(v).n = "1"),
    (v) => (input(v).extra = null),
    (v) => delete input(v).command,
    (v) => (parts(v)[0]!.providerOptions = {}),
    (v) => parts(v).reverse(),
    (v) => parts(v).pop(),
    (v) => (v.at = new Date(1)),
    (v) => (v.content = {}),
    // Changes JSON does not see: undefined and functions are left out, key order aside.
    (v) => (input(v).gone = undefined),
    (v) => (v.f = () => 1),
    (v) => {
      const { role, ...rest } = v;
      for (const k of Object.keys(v)) delete v[k];
      Object.assign(v, rest, { role });
    },
  ];

  it("is true exactly when the two values' JSON is the same (up to key order)", () => {
    expect(sameJson(base(), base())).toBe(true);
    for (const change of changes) {
      const changed = base();
      change(changed);
      const sameText = JSON.stringify(sortedKeys(base())) === JSON.stringify(sortedKeys(changed));
      expect(sameJson(base(), changed)).toBe(sameText);
      expect(sameJson(changed, base())).toBe(sameText);
    }
  });
});

/** A copy of `v` with every object's keys sorted, so its JSON does not depend on their order. */
function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v instanceof Date || typeof v !== "object" || v === null) return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
  );
}
