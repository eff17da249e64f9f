// The checker: every promise of the contract, checked over what is left after a scenario —
// the chats and messages in the database, the evidence the commands left in each workspace,
// the fault proxy's log and the agents' restarts. It is a pure function so its own tests can
// feed it hand-made histories that break each rule.
//
// What each rule can soundly claim:
// - at-most-once: a marker with two `start`s, or an edit line twice, is two runs of one call.
// - one-result: every committed tool call has exactly one tool-result, and every result
//   answers a committed call.
// - honest-result: a result must not contradict the evidence: `not_run` / `not_applied` /
//   `failed` / an execute `error` only when nothing ran; `canceled` only for a foreground
//   process that did not reach its end; `completed` with exit 0 only with start and end;
//   `timed_out` / `background` only for a command that started (or after an agent restart);
//   `applied` only with the evidence present, once.
// - unknown-honest: an `unknown` whose reason says the agent did not answer
//   (agent_unreachable, agent_no_answer) is a violation when the proxy saw requests for that
//   call, injected no fault into any of them, each reached the agent and its answer was
//   delivered in full to the server well within the answer timeout, and the agent did not
//   restart between the call and its result. (Requests a server never sent cannot be seen,
//   so this misses some lies but never accuses an honest unknown.)
// - never-killed: a process that started and never reached its end must have a result that
//   says so (`canceled` or `unknown`) or an agent restart after its call; background work and
//   commands left running past their timeout are never killed by an interrupt.
// - settled: every chat ends `waiting` or `error`.
// - model-answer: no assistant message is empty, and one without tool calls is a final answer
//   unless the chat was interrupted (the campaign's model always says something and sends its
//   step text with the step's tool calls; an interrupt keeps partial text only when there is
//   some): anything else is a model stream that was cut off and committed as the answer.
// - billing: at most one usage record per batch, billed_ms no more than the batch's
//   wall-clock span (assistant message commit to usage commit), billed_calls no more than
//   the batch's calls, runtime_ms equal to billed_ms; an assistant message's model window no
//   longer than the time since the message before it.

import { parseChatId, toMessageId, toolCallUuid } from "../../src/contract/index.ts";
import type { MessagePart } from "../../src/chatd/messages.ts";
import { isFinalAnswer } from "./model.ts";
import type { ProxyLogEntry } from "./proxy.ts";

export type Rule =
  | "at-most-once"
  | "one-result"
  | "honest-result"
  | "unknown-honest"
  | "never-killed"
  | "settled"
  | "billing"
  | "model-answer";

export interface Violation {
  seed: number;
  chatId: string;
  toolCallId?: string;
  rule: Rule;
  seen: string;
}

export interface CheckedMessage {
  /** chat_messages.id, decimal. */
  id: string;
  role: "system" | "user" | "assistant" | "tool";
  /** created_at, ms since the epoch. */
  createdAt: number;
  runtimeMs: number;
  content: MessagePart[];
}

export interface CheckedChat {
  id: string;
  status: string;
  /** The name of the workspace agent the chat runs on. */
  agent: string;
  /** The chat row's execution state in words, for people reading a violation. */
  state?: string;
  messages: CheckedMessage[];
}

/** What the commands left in one workspace. */
export interface Evidence {
  /** markers/<call ID>: how many `start` and `end` lines. */
  markers: Map<string, { starts: number; ends: number }>;
  /** writes/<call ID> exists. */
  writes: Set<string>;
  /** How many times each call ID's line is in the edit files. */
  editLines: Map<string, number>;
}

export interface ScenarioHistory {
  seed: number;
  chats: CheckedChat[];
  /** By agent name. */
  evidence: Map<string, Evidence>;
  proxyLog: ProxyLogEntry[];
  /** By agent name: the instants (ms) at which the agent was killed. */
  agentRestarts: Map<string, number[]>;
  agentAnswerTimeoutMs: number;
  /** Chats that were sent an interrupt (or an interrupting message): partial answers are theirs to keep. */
  interruptedChats: Set<string>;
}

/** Clock slop between the database and the replicas (one host), plus rounding. */
const CLOCK_SLOP_MS = 25;
/** An answer delivered this long before the answer timeout cannot have been given up on. */
const ANSWER_MARGIN_MS = 500;

type Result = { status?: unknown; reason?: unknown; exit_code?: unknown } & Record<string, unknown>;

interface Call {
  id: string;
  tool: string;
  args: Record<string, unknown>;
  message: CheckedMessage;
  results: { result: Result; message: CheckedMessage }[];
}

export function check(h: ScenarioHistory): Violation[] {
  const out: Violation[] = [];
  for (const chat of h.chats) {
    const v = (rule: Rule, seen: string, toolCallId?: string) =>
      out.push({ seed: h.seed, chatId: chat.id, rule, seen, ...(toolCallId && { toolCallId }) });
    if (chat.status !== "waiting" && chat.status !== "error") {
      v(
        "settled",
        `chat is still "${chat.status}" after the settle time (${chat.state ?? "?"}; last message: ${JSON.stringify(chat.messages.at(-1)?.content ?? []).slice(0, 300)})`,
      );
    }
    const ev = h.evidence.get(chat.agent) ?? {
      markers: new Map<string, { starts: number; ends: number }>(),
      writes: new Set<string>(),
      editLines: new Map<string, number>(),
    };
    const restarts = h.agentRestarts.get(chat.agent) ?? [];
    const calls = new Map<string, Call>();
    const batches: { message: CheckedMessage; calls: number; usage: CheckedMessage[] }[] = [];
    for (const m of chat.messages) {
      if (m.role === "assistant") {
        const parts = m.content.filter((p) => p.type === "tool-call");
        if (parts.length > 0) batches.push({ message: m, calls: parts.length, usage: [] });
        for (const p of parts) {
          if (calls.has(p.tool_call_id)) {
            v(
              "one-result",
              `the call ID is in two assistant messages (${calls.get(p.tool_call_id)!.message.id}, ${m.id})`,
              p.tool_call_id,
            );
            continue;
          }
          calls.set(p.tool_call_id, {
            id: p.tool_call_id,
            tool: p.tool_name,
            args: (p.args ?? {}) as Record<string, unknown>,
            message: m,
            results: [],
          });
        }
      }
      for (const p of m.content) {
        if (p.type === "tool-result") {
          const c = calls.get(p.tool_call_id);
          if (!c)
            v(
              "one-result",
              `a result (${JSON.stringify(p.result)}) answers no committed call`,
              p.tool_call_id,
            );
          else c.results.push({ result: (p.result ?? {}) as Result, message: m });
        }
        if (p.type === "tool-batch-usage") {
          const b = batches.at(-1);
          if (!b) v("billing", `a usage record (message ${m.id}) follows no tool batch`);
          else b.usage.push(m);
        }
      }
    }

    // The campaign's model never answers with nothing, and answers without tool calls only
    // with a final text; an interrupt keeps partial text, but only when there is some. So an
    // empty answer, or a partial one in a chat nobody interrupted, is a model stream that was
    // cut off and committed as if it were the answer.
    for (const m of chat.messages) {
      if (m.role !== "assistant") continue;
      if (m.content.some((p) => p.type === "tool-call")) continue;
      const said = m.content.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");
      if (said === "") {
        v(
          "model-answer",
          `assistant message ${m.id} is empty (${JSON.stringify(m.content)}), an answer the model never gave, committed after ${m.runtimeMs} ms of its stream`,
        );
      } else if (!h.interruptedChats.has(chat.id) && !isFinalAnswer(said)) {
        v(
          "model-answer",
          `assistant message ${m.id} holds ${JSON.stringify(said)}, part of an answer, though nobody interrupted the chat (committed after ${m.runtimeMs} ms of its stream)`,
        );
      }
    }
    // A model window runs from just before the stream opens (a step sent ahead: from when a
    // task took it), which is after the message before it was committed, to the commit of its
    // assistant message (CHATD.md 9).
    chat.messages.forEach((m, i) => {
      const before = chat.messages[i - 1];
      if (m.role !== "assistant" || !before) return;
      const span = m.createdAt - before.createdAt;
      if (m.runtimeMs > span + CLOCK_SLOP_MS) {
        v(
          "billing",
          `assistant message ${m.id} bills a model window of ${m.runtimeMs} ms in a span of ${Math.round(span)} ms since message ${before.id}`,
        );
      }
    });
    for (const b of batches) {
      if (b.usage.length > 1) {
        v(
          "billing",
          `batch of message ${b.message.id} has ${b.usage.length} usage records (messages ${b.usage.map((u) => u.id).join(", ")})`,
        );
      }
      for (const u of b.usage) {
        const part = u.content.find((p) => p.type === "tool-batch-usage");
        if (!part || part.type !== "tool-batch-usage") continue;
        const span = u.createdAt - b.message.createdAt;
        if (part.billed_ms > span + CLOCK_SLOP_MS) {
          v(
            "billing",
            `batch of message ${b.message.id} billed ${part.billed_ms} ms in a wall-clock span of ${Math.round(span)} ms`,
          );
        }
        if (part.billed_calls > b.calls) {
          v(
            "billing",
            `batch of message ${b.message.id} billed ${part.billed_calls} calls of ${b.calls}`,
          );
        }
        if (u.runtimeMs !== part.billed_ms) {
          v(
            "billing",
            `usage record ${u.id}: runtime_ms ${u.runtimeMs} differs from billed_ms ${part.billed_ms}`,
          );
        }
      }
    }

    for (const c of calls.values()) {
      const say = (rule: Rule, seen: string) => v(rule, seen, c.id);
      const statuses = c.results.map((r) => String(r.result.status));
      if (c.results.length !== 1) {
        say(
          "one-result",
          `${c.results.length} results${statuses.length ? `: ${statuses.join(", ")}` : ""}`,
        );
      }
      const first = c.results[0];
      const result = first?.result;
      const status = result?.status;
      const restartedAfter = (t: number) => restarts.some((r) => r >= t - CLOCK_SLOP_MS);
      if (c.tool === "execute") {
        const mk = ev.markers.get(c.id) ?? { starts: 0, ends: 0 };
        const background = c.args.run_in_background === true;
        if (mk.starts > 1 || mk.ends > 1) {
          say(
            "at-most-once",
            `the command ran ${mk.starts} times (markers: ${mk.starts} start, ${mk.ends} end)`,
          );
        }
        if (!result) continue;
        const markers = `markers: ${mk.starts} start, ${mk.ends} end`;
        switch (status) {
          case "not_run":
            if (mk.starts > 0) say("honest-result", `not_run, but the command ran (${markers})`);
            break;
          case "error":
            if (mk.starts > 0)
              say(
                "honest-result",
                `error "${String(result.message)}", but the command ran (${markers})`,
              );
            break;
          case "canceled":
            if (background)
              say(
                "honest-result",
                `a background command was canceled by an interrupt (${markers})`,
              );
            if (mk.ends > 0)
              say("honest-result", `canceled, but the command reached its end (${markers})`);
            break;
          case "completed":
            if (result.exit_code === 0 && (mk.starts !== 1 || mk.ends !== 1)) {
              say("honest-result", `completed with exit code 0, but ${markers}`);
            }
            break;
          case "timed_out":
          case "background":
            // It says the process started (and, timed out, ran past its timeout): its first
            // command ran, unless an agent restart killed it at once.
            if (mk.starts === 0 && !restartedAfter(c.message.createdAt)) {
              say("honest-result", `${String(status)}, but the command never ran (${markers})`);
            }
            break;
          case "unknown":
            checkUnknown(h, chat, c, first.message, say);
            break;
          default:
            break;
        }
        if (
          mk.starts > 0 &&
          mk.ends === 0 &&
          status !== "canceled" &&
          status !== "unknown" &&
          !restartedAfter(c.message.createdAt)
        ) {
          say(
            "never-killed",
            `result ${String(status)}, and the process was killed: it started but never reached its end, with no cancel and no agent restart`,
          );
        }
      } else if (c.tool === "write_file" || c.tool === "edit_files") {
        const present =
          c.tool === "write_file" ? (ev.writes.has(c.id) ? 1 : 0) : (ev.editLines.get(c.id) ?? 0);
        const what =
          c.tool === "write_file"
            ? `file written: ${present ? "yes" : "no"}`
            : `edit lines: ${present}`;
        if (present > 1) say("at-most-once", `the edit was applied ${present} times`);
        if (!result) continue;
        switch (status) {
          case "applied":
            if (present !== 1) say("honest-result", `applied, but ${what}`);
            break;
          case "not_applied":
          case "failed":
          case "error":
            if (present > 0)
              say("honest-result", `${String(status)}, but the change is there (${what})`);
            break;
          case "unknown":
            checkUnknown(h, chat, c, first.message, say);
            break;
          default:
            break;
        }
      }
    }
  }
  return out;
}

const NO_ANSWER_REASONS = new Set(["agent_unreachable", "agent_no_answer"]);

function checkUnknown(
  h: ScenarioHistory,
  chat: CheckedChat,
  c: Call,
  resultMessage: CheckedMessage,
  say: (rule: Rule, seen: string) => void,
): void {
  const reason = String(c.results[0]?.result.reason);
  if (!NO_ANSWER_REASONS.has(reason)) return;
  const chatId = parseChatId(chat.id);
  const messageId = toMessageId(c.message.id);
  if (!chatId || messageId === undefined) return;
  const uuid = toolCallUuid(chatId, messageId, c.id) as string;
  const seen = h.proxyLog.filter((e) => e.uuid === uuid);
  if (seen.length === 0) return;
  const answered = seen.every(
    (e) =>
      e.action === "pass" &&
      e.delivered &&
      e.endedAt !== undefined &&
      e.endedAt - e.at < h.agentAnswerTimeoutMs - ANSWER_MARGIN_MS,
  );
  const restarted = (h.agentRestarts.get(chat.agent) ?? []).some(
    (r) => r >= c.message.createdAt - CLOCK_SLOP_MS && r <= resultMessage.createdAt + CLOCK_SLOP_MS,
  );
  if (answered && !restarted) {
    const routes = seen.map(
      (e) => `${e.route} → ${e.agentStatus ?? "?"} in ${(e.endedAt ?? e.at) - e.at} ms`,
    );
    say(
      "unknown-honest",
      `unknown (${reason}), but the agent answered every request for it in full and in time, with no fault injected: ${routes.join("; ")}`,
    );
  }
}

/** One line per violation, with the seed that replays its scenario. */
export function formatViolation(v: Violation): string {
  return `[${v.rule}] seed=${v.seed} chat=${v.chatId}${v.toolCallId ? ` call=${v.toolCallId}` : ""}: ${v.seen}`;
}
