// The model for the fault campaign: the fake OpenAI-compatible provider answering from each
// chat's plan. A chat's first user message names its plan (`chaos plan <key>`); the number of
// tool-calling assistant messages so far says which step comes next, so a retried or failed-over
// generation asks again and gets the same step. Steps are batches of tool calls (parallel
// batches too), then plain text. Every side-effecting call leaves evidence in the workspace:
// an execute appends `start` and `end` to markers/<provider call ID>, write_file creates
// writes/<call ID>, and edit_files inserts a line holding the call ID under the anchor of the
// chat's edit file, so a double application shows twice.

import path from "node:path";
import type { FakeChatRequest, FakeStep, FakeToolCall } from "../support/fake-provider.ts";
import type { Rng } from "./rng.ts";

export type CallKind = "short" | "long" | "background" | "write" | "edit";

export interface PlannedCall {
  /** The provider tool call ID: unique within the campaign, and the evidence file's name. */
  id: string;
  kind: CallKind;
  /** How long the command sleeps between its `start` and `end` markers. */
  sleepMs: number;
  /** The execute `timeout` argument (a long call sleeps past it: timed out, left running). */
  timeout: string;
}

export interface Plan {
  key: string;
  /** The workspace directory (the agent's `--dir`). */
  dir: string;
  /** The chat's edit file, holding ANCHOR. */
  editFile: string;
  steps: PlannedCall[][];
  /** Delay before every streamed chunk, so interrupts land mid-stream too. */
  chunkDelayMs: number;
}

export const ANCHOR = "ANCHOR";
export const PLAN_PREFIX = "chaos plan ";
/** The longest sleep of any planned command: the settle wait for left-running processes. */
export const MAX_SLEEP_MS = 5_000;

export function makePlan(rng: Rng, key: string, dir: string): Plan {
  const steps: PlannedCall[][] = [];
  const n = rng.int(2, 5);
  for (let s = 0; s < n; s++) {
    const size = rng.weighted({ 1: 3, 2: 2, 3: 1 });
    const batch: PlannedCall[] = [];
    let edited = false;
    for (let k = 0; k < Number(size); k++) {
      let kind = rng.weighted<CallKind>({ short: 4, long: 2, background: 2, write: 2, edit: 2 });
      // One edit of the chat's edit file per batch: concurrent edits of one file could race.
      if (kind === "edit" && edited) kind = "short";
      if (kind === "edit") edited = true;
      const sleepMs =
        kind === "short"
          ? rng.int(100, 1200)
          : kind === "write" || kind === "edit"
            ? 0
            : rng.int(1500, MAX_SLEEP_MS);
      const timeout = kind === "long" ? rng.pick(["1s", "1500ms"]) : "20s";
      batch.push({ id: `${key}_s${s}_${k}`, kind, sleepMs, timeout });
    }
    steps.push(batch);
  }
  return {
    key,
    dir,
    editFile: path.join(dir, `edits-${key}.txt`),
    steps,
    chunkDelayMs: rng.int(5, 40),
  };
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

export function toolCallFor(plan: Plan, c: PlannedCall): FakeToolCall {
  const marker = `markers/${c.id}`;
  const command = `echo start >> ${marker}; sleep ${seconds(c.sleepMs)}; echo end >> ${marker}`;
  switch (c.kind) {
    case "short":
    case "long":
      return { id: c.id, name: "execute", args: { command, timeout: c.timeout } };
    case "background":
      return { id: c.id, name: "execute", args: { command, run_in_background: true } };
    case "write":
      return {
        id: c.id,
        name: "write_file",
        args: { path: path.join(plan.dir, "writes", c.id), content: `${c.id}\n` },
      };
    case "edit":
      return {
        id: c.id,
        name: "edit_files",
        args: {
          files: [
            { path: plan.editFile, edits: [{ old_text: ANCHOR, new_text: `${ANCHOR}\n${c.id}` }] },
          ],
        },
      };
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p) =>
        typeof p === "object" && p !== null && "text" in p
          ? String((p as { text: unknown }).text)
          : "",
      )
      .join("");
  }
  return "";
}

const DONE = (key: string) => `Plan ${key} is done.`;
const NO_PLAN = "No plan for this chat.";

/** Whether `text` is a whole answer the campaign's model gives without tool calls. */
export function isFinalAnswer(text: string): boolean {
  return text === NO_PLAN || /^Plan \S+ is done\.$/.test(text);
}

/** The fake provider's answer for a chaos chat, from its plan and the conversation so far. */
export function planResponder(plans: Map<string, Plan>): (request: FakeChatRequest) => FakeStep {
  return (request) => {
    const first = request.messages.find((m) => m.role === "user");
    const text = textOf(first?.content);
    const key = text.startsWith(PLAN_PREFIX) ? text.slice(PLAN_PREFIX.length).trim() : "";
    const plan = plans.get(key);
    if (!plan) return { text: NO_PLAN };
    const step = request.messages.filter(
      (m) => m.role === "assistant" && (m.tool_calls?.length ?? 0) > 0,
    ).length;
    const batch = plan.steps[step];
    if (!batch) return { text: DONE(key), delayMs: plan.chunkDelayMs };
    return {
      text: `Step ${step} of plan ${key}.`,
      toolCalls: batch.map((c) => toolCallFor(plan, c)),
      delayMs: plan.chunkDelayMs,
    };
  };
}
