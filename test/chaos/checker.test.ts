// The checker's own tests: hand-made histories that break each rule must be reported, with
// the seed, chat and call; a history that keeps every promise must give nothing.

import { describe, expect, it } from "vitest";
import type { MessagePart } from "../../src/chatd/messages.ts";
import { parseChatId, toMessageId, toolCallUuid } from "../../src/contract/index.ts";
import {
  check,
  type CheckedChat,
  type CheckedMessage,
  type Evidence,
  type ScenarioHistory,
} from "./checker.ts";
import type { ProxyLogEntry } from "./proxy.ts";

const CHAT = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
const T0 = 1_700_000_000_000;

function msg(
  id: number,
  role: CheckedMessage["role"],
  at: number,
  content: MessagePart[],
  runtimeMs = 0,
): CheckedMessage {
  return { id: String(id), role, createdAt: T0 + at, runtimeMs, content };
}
const text = (t: string): MessagePart => ({ type: "text", text: t });
const exec = (id: string, args: Record<string, unknown> = {}): MessagePart => ({
  type: "tool-call",
  tool_call_id: id,
  tool_name: "execute",
  args: { command: `echo start >> markers/${id}`, ...args },
});
const write = (id: string): MessagePart => ({
  type: "tool-call",
  tool_call_id: id,
  tool_name: "write_file",
  args: { path: `/w/writes/${id}`, content: id },
});
const edit = (id: string): MessagePart => ({
  type: "tool-call",
  tool_call_id: id,
  tool_name: "edit_files",
  args: { files: [] },
});
const result = (id: string, tool: string, r: Record<string, unknown>): MessagePart => ({
  type: "tool-result",
  tool_call_id: id,
  tool_name: tool,
  result: r,
  is_error: r.status === "error",
});
const usage = (billed_ms: number, billed_calls: number): MessagePart => ({
  type: "tool-batch-usage",
  billed_ms,
  billed_calls,
});

function evidence(
  o: {
    markers?: Record<string, [number, number]>;
    writes?: string[];
    edits?: Record<string, number>;
  } = {},
): Evidence {
  return {
    markers: new Map(
      Object.entries(o.markers ?? {}).map(([k, [starts, ends]]) => [k, { starts, ends }]),
    ),
    writes: new Set(o.writes ?? []),
    editLines: new Map(Object.entries(o.edits ?? {})),
  };
}

function history(
  messages: CheckedMessage[],
  o: {
    status?: string;
    evidence?: Evidence;
    proxyLog?: ProxyLogEntry[];
    restarts?: number[];
    interrupted?: boolean;
  } = {},
): ScenarioHistory {
  const chat: CheckedChat = { id: CHAT, status: o.status ?? "waiting", agent: "agent-0", messages };
  return {
    seed: 42,
    chats: [chat],
    evidence: new Map([["agent-0", o.evidence ?? evidence()]]),
    proxyLog: o.proxyLog ?? [],
    agentRestarts: new Map([["agent-0", o.restarts ?? []]]),
    agentAnswerTimeoutMs: 3_000,
    interruptedChats: new Set(o.interrupted ? [CHAT] : []),
  };
}

/** The rules reported, each with the call (or "-"). */
function reported(h: ScenarioHistory): string[] {
  const vs = check(h);
  for (const v of vs) {
    expect(v.seed).toBe(42);
    expect(v.chatId).toBe(CHAT);
    expect(v.seen).not.toBe("");
  }
  return vs.map((v) => `${v.rule} ${v.toolCallId ?? "-"}`).sort();
}

const user = msg(1, "user", 0, [text("chaos plan k")]);

describe("the chaos checker", () => {
  it("reports nothing for a history that keeps every promise", () => {
    const h = history(
      [
        user,
        msg(
          2,
          "assistant",
          100,
          [
            text("step"),
            exec("fg"),
            exec("bg", { run_in_background: true }),
            write("w"),
            edit("e"),
          ],
          50,
        ),
        msg(3, "tool", 2_000, [
          result("fg", "execute", { status: "completed", exit_code: 0, output: "" }),
        ]),
        msg(4, "tool", 2_000, [result("bg", "execute", { status: "background", process_id: "p" })]),
        msg(5, "tool", 2_000, [result("w", "write_file", { status: "applied" })]),
        msg(6, "tool", 2_000, [result("e", "edit_files", { status: "applied" })]),
        msg(7, "tool", 2_000, [usage(1_800, 4)], 1_800),
        msg(8, "assistant", 2_100, [
          exec("cx"),
          exec("nr"),
          exec("to", { timeout: "1s" }),
          exec("un"),
        ]),
        msg(9, "tool", 3_000, [result("cx", "execute", { status: "canceled", output: "" })]),
        msg(10, "tool", 3_000, [result("nr", "execute", { status: "not_run" })]),
        msg(11, "tool", 3_000, [result("to", "execute", { status: "timed_out", process_id: "p" })]),
        msg(12, "tool", 3_000, [
          result("un", "execute", { status: "unknown", reason: "agent_no_answer" }),
        ]),
        msg(13, "assistant", 3_100, [text("Plan k is done.")]),
      ],
      {
        evidence: evidence({
          markers: { fg: [1, 1], bg: [1, 1], cx: [1, 0], to: [1, 1], un: [1, 0] },
          writes: ["w"],
          edits: { e: 1 },
        }),
      },
    );
    expect(reported(h)).toEqual([]);
  });

  it("reports a command that ran twice and an edit applied twice", () => {
    const h = history(
      [
        user,
        msg(2, "assistant", 100, [exec("a"), edit("e")]),
        msg(3, "tool", 500, [result("a", "execute", { status: "completed", exit_code: 0 })]),
        msg(4, "tool", 500, [result("e", "edit_files", { status: "applied" })]),
      ],
      { evidence: evidence({ markers: { a: [2, 2] }, edits: { e: 2 } }) },
    );
    expect(reported(h)).toEqual([
      "at-most-once a",
      "at-most-once e",
      "honest-result a",
      "honest-result e",
    ]);
  });

  it("reports a call without a result, one with two, and a result for no call", () => {
    const h = history([
      user,
      msg(2, "assistant", 100, [exec("none"), exec("two")]),
      msg(3, "tool", 500, [result("two", "execute", { status: "not_run" })]),
      msg(4, "tool", 600, [result("two", "execute", { status: "not_run" })]),
      msg(5, "tool", 600, [result("ghost", "execute", { status: "not_run" })]),
    ]);
    expect(reported(h)).toEqual(["one-result ghost", "one-result none", "one-result two"]);
  });

  it("reports results that contradict the evidence", () => {
    const h = history(
      [
        user,
        msg(2, "assistant", 100, [
          exec("nr"),
          exec("cx"),
          exec("bgc", { run_in_background: true }),
          exec("done"),
          exec("err"),
          exec("bgn", { run_in_background: true }),
          write("w1"),
          write("w2"),
          edit("e1"),
          edit("e2"),
        ]),
        msg(3, "tool", 900, [result("nr", "execute", { status: "not_run" })]),
        msg(4, "tool", 900, [result("cx", "execute", { status: "canceled" })]),
        msg(5, "tool", 900, [result("bgc", "execute", { status: "canceled" })]),
        msg(6, "tool", 900, [result("done", "execute", { status: "completed", exit_code: 0 })]),
        msg(7, "tool", 900, [
          result("err", "execute", { status: "error", message: "did not run" }),
        ]),
        msg(8, "tool", 900, [result("w1", "write_file", { status: "applied" })]),
        msg(8, "tool", 900, [result("bgn", "execute", { status: "background", process_id: "p" })]),
        msg(9, "tool", 900, [result("w2", "write_file", { status: "not_applied" })]),
        msg(10, "tool", 900, [result("e1", "edit_files", { status: "failed" })]),
        msg(11, "tool", 900, [result("e2", "edit_files", { status: "applied" })]),
      ],
      {
        evidence: evidence({
          markers: { nr: [1, 1], cx: [1, 1], bgc: [1, 0], done: [1, 0], err: [1, 1] },
          writes: ["w2"],
          edits: { e1: 1 },
        }),
      },
    );
    expect(reported(h)).toEqual([
      "honest-result bgc",
      "honest-result bgn",
      "honest-result cx",
      "honest-result done",
      "honest-result e1",
      "honest-result e2",
      "honest-result err",
      "honest-result nr",
      "honest-result w1",
      "honest-result w2",
      "never-killed done",
    ]);
  });

  describe("an unknown that says the agent did not answer", () => {
    const uuid = toolCallUuid(parseChatId(CHAT)!, toMessageId(2)!, "u");
    const messages = [
      user,
      msg(2, "assistant", 100, [exec("u")]),
      msg(3, "tool", 5_000, [
        result("u", "execute", { status: "unknown", reason: "agent_no_answer" }),
      ]),
    ];
    const entry = (e: Partial<ProxyLogEntry> = {}): ProxyLogEntry => ({
      agent: "agent-0",
      method: "POST",
      route: "POST /api/v0/processes/start",
      uuid,
      toolCallId: "u",
      action: "pass",
      at: T0 + 200,
      endedAt: T0 + 250,
      forwarded: true,
      agentStatus: 200,
      delivered: true,
      ...e,
    });
    const ev = evidence({ markers: { u: [1, 1] } });

    it("is reported when the agent answered every request in full and in time", () => {
      expect(reported(history(messages, { evidence: ev, proxyLog: [entry()] }))).toEqual([
        "unknown-honest u",
      ]);
    });

    it("is honest when a fault hit one of its requests, an answer came late, or the agent restarted", () => {
      for (const o of [
        { proxyLog: [entry(), entry({ action: "cut_response", delivered: false })] },
        { proxyLog: [entry({ endedAt: T0 + 200 + 2_900 })] },
        { proxyLog: [entry()], restarts: [T0 + 1_000] },
        { proxyLog: [] },
      ]) {
        expect(reported(history(messages, { evidence: ev, ...o }))).toEqual([]);
      }
    });
  });

  it("reports a process killed with no cancel and no agent restart, but not one an agent restart ended", () => {
    const messages = [
      user,
      msg(2, "assistant", 100, [
        exec("to", { timeout: "1s" }),
        exec("bg", { run_in_background: true }),
      ]),
      msg(3, "tool", 1_500, [result("to", "execute", { status: "timed_out", process_id: "p" })]),
      msg(4, "tool", 1_500, [result("bg", "execute", { status: "background", process_id: "q" })]),
    ];
    const ev = evidence({ markers: { to: [1, 0], bg: [1, 0] } });
    expect(reported(history(messages, { evidence: ev }))).toEqual([
      "never-killed bg",
      "never-killed to",
    ]);
    expect(reported(history(messages, { evidence: ev, restarts: [T0 + 3_000] }))).toEqual([]);
    expect(reported(history(messages, { evidence: ev, restarts: [T0 + 50] }))).toEqual([
      "never-killed bg",
      "never-killed to",
    ]);
  });

  it("reports an empty assistant message, and a partial one in a chat nobody interrupted", () => {
    const answer = (t: string) => [user, msg(2, "assistant", 500, [text(t)], 145)];
    expect(reported(history(answer("")))).toEqual(["model-answer -"]);
    expect(reported(history(answer(""), { interrupted: true }))).toEqual(["model-answer -"]);
    expect(reported(history(answer("Step 0 of")))).toEqual(["model-answer -"]);
    expect(reported(history(answer("Step 0 of"), { interrupted: true }))).toEqual([]);
    expect(reported(history(answer("Plan k is done.")))).toEqual([]);
  });

  it("reports a chat that did not settle", () => {
    expect(reported(history([user], { status: "running" }))).toEqual(["settled -"]);
    expect(reported(history([user], { status: "interrupting" }))).toEqual(["settled -"]);
    expect(reported(history([user], { status: "error" }))).toEqual([]);
  });

  it("reports billing that counts an interval twice", () => {
    const batch = (usageParts: CheckedMessage[]) =>
      history(
        [
          user,
          msg(2, "assistant", 1_000, [write("w")]),
          msg(3, "tool", 2_000, [result("w", "write_file", { status: "applied" })]),
          ...usageParts,
        ],
        { evidence: evidence({ writes: ["w"] }) },
      );
    expect(reported(batch([msg(4, "tool", 2_000, [usage(900, 1)], 900)]))).toEqual([]);
    expect(
      reported(
        batch([
          msg(4, "tool", 2_000, [usage(900, 1)], 900),
          msg(5, "tool", 2_000, [usage(900, 1)], 900),
        ]),
      ),
    ).toEqual(["billing -"]);
    expect(reported(batch([msg(4, "tool", 2_000, [usage(1_500, 1)], 1_500)]))).toEqual([
      "billing -",
    ]);
    expect(reported(batch([msg(4, "tool", 2_000, [usage(900, 2)], 900)]))).toEqual(["billing -"]);
    expect(reported(batch([msg(4, "tool", 2_000, [usage(900, 1)], 1_800)]))).toEqual(["billing -"]);
    expect(reported(history([user, msg(2, "tool", 10, [usage(5, 1)], 5)]))).toEqual(["billing -"]);
    // A model window longer than the time since the message before it.
    expect(
      reported(history([user, msg(2, "assistant", 500, [text("Plan k is done.")], 480)])),
    ).toEqual([]);
    expect(
      reported(history([user, msg(2, "assistant", 500, [text("Plan k is done.")], 900)])),
    ).toEqual(["billing -"]);
  });
});
