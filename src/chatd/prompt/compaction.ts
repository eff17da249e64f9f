// Compaction (docs/prompt.md): when a model step's prompt passes a share of the model's context
// limit, the chat's next action writes a summary of the conversation so far, committed as a
// boundary message; the model's prompt then starts at the boundary. This file holds the rules
// (limits, threshold, when one is due) and the summary request; generation.ts runs it as one
// fenced action like any other.

import type { ModelMessage } from "ai";
import { isUsageRecord, type ChatMessage, type CompactionPart } from "../messages.ts";
import { sinceBoundary } from "./messages.ts";

/** The context limit of a model that declares none and whose provider's limit is unknown. */
export const DEFAULT_CONTEXT_LIMIT_TOKENS = 128_000;
/** A compaction follows a step whose prompt passed this share of the limit (percent). */
export const DEFAULT_COMPACT_THRESHOLD_PERCENT = 70;
/** A threshold of 100 % turns compaction off. */
export const COMPACTION_OFF_PERCENT = 100;
/** One tool result may take at most this share of the context (as bytes, ~4 a token). */
export const TOOL_RESULT_CONTEXT_SHARE = 0.1;
/** The smallest tool result budget, whatever the limit (bytes). */
export const MIN_TOOL_RESULT_BUDGET_BYTES = 2 * 1024;
/** Bytes a token takes, roughly, in English text and code. */
export const BYTES_PER_TOKEN = 4;
/** The transcript a summary is written from takes at most this share of the context. */
const TRANSCRIPT_CONTEXT_SHARE = 0.5;
/** A tool result's JSON in the transcript is cut to this many bytes. */
const TRANSCRIPT_RESULT_MAX_BYTES = 2_000;

/** What a compaction needs to know of the chat's model. */
export interface ContextBudget {
  /** The model's context limit, tokens. */
  limitTokens: number;
  /** 1–100; 100 = never compact on size. */
  thresholdPercent: number;
}

/** A model's budget from its settings, the defaults where it has none. */
export function contextBudget(m: {
  contextLimitTokens?: number;
  compactThresholdPercent?: number;
}): ContextBudget {
  return {
    limitTokens: m.contextLimitTokens ?? DEFAULT_CONTEXT_LIMIT_TOKENS,
    thresholdPercent: m.compactThresholdPercent ?? DEFAULT_COMPACT_THRESHOLD_PERCENT,
  };
}

/** The tool result budget for a model with this limit, never above `maxBytes`. */
export function toolResultBudgetBytes(limitTokens: number, maxBytes: number): number {
  const share = Math.floor(limitTokens * BYTES_PER_TOKEN * TOOL_RESULT_CONTEXT_SHARE);
  return Math.min(maxBytes, Math.max(MIN_TOOL_RESULT_BUDGET_BYTES, share));
}

/** The threshold in tokens, or undefined when compaction on size is off. */
export function thresholdTokens(b: ContextBudget): number | undefined {
  if (b.thresholdPercent >= COMPACTION_OFF_PERCENT) return undefined;
  return Math.floor((b.limitTokens * b.thresholdPercent) / 100);
}

/**
 * Why the chat's next action is a compaction, or undefined when it is not: the user (or a
 * provider's refusal) asked for one, or the latest model step since the boundary had a prompt
 * past the threshold. Nothing to compact (no message since the boundary but a user's) is never due.
 */
export function compactionDue(
  history: ChatMessage[],
  requested: CompactionPart["reason"] | undefined,
  budget: ContextBudget,
): CompactionPart["reason"] | undefined {
  const since = sinceBoundary(history).filter((m) => !m.boundary);
  if (!since.some((m) => m.role === "assistant")) return undefined;
  if (requested) return requested;
  const limit = thresholdTokens(budget);
  if (limit === undefined) return undefined;
  for (let i = since.length - 1; i >= 0; i--) {
    const m = since[i]!;
    if (m.role === "assistant" && m.promptTokens !== null) {
      return m.promptTokens >= limit ? "threshold" : undefined;
    }
  }
  return undefined;
}

/**
 * compactionDue once an assistant step whose prompt took `promptTokens` is added to the history:
 * that step's prompt decides (the latest one reported).
 */
export function compactionDueAfterStep(
  promptTokens: number,
  requested: CompactionPart["reason"] | undefined,
  budget: ContextBudget,
): CompactionPart["reason"] | undefined {
  if (requested) return requested;
  const limit = thresholdTokens(budget);
  return limit !== undefined && promptTokens >= limit ? "threshold" : undefined;
}

/** The one line that opens the summary request; the demo model recognises it. */
export const COMPACTION_PROMPT_HEAD =
  "You are compacting a conversation between a user and a coding agent.";

export const COMPACTION_PROMPT = [
  COMPACTION_PROMPT_HEAD,
  "The agent will continue from your summary alone: the messages themselves are gone from its",
  "view. Write a summary in Markdown with these sections, each short and concrete:",
  "- Goal: what the user wants, in their words where it matters.",
  "- Decisions: what was decided and why.",
  "- Files: every file read, created or changed, with what changed.",
  "- Commands: the commands run and how they ended (exit codes, what failed).",
  "- Background processes: EVERY process ID still running or not known to have ended, with its command.",
  "- Open tasks: what is left to do, and the next step.",
  "Do not call tools. Answer with the summary only.",
].join("\n");

/**
 * The summary request: no tools, the compaction prompt as system, and the conversation since
 * the boundary (with the previous summary) as one transcript, cut to fit the context.
 */
export function compactionRequest(
  history: ChatMessage[],
  limitTokens: number,
): { system: string; messages: ModelMessage[]; compacted: number } {
  const since = sinceBoundary(history);
  const lines: string[] = [];
  let compacted = 0;
  for (const m of since) {
    // Usage records were never part of the conversation: they are not counted as compacted.
    if (m.visibility === "user" || isUsageRecord(m)) continue;
    if (!m.boundary) compacted += 1;
    for (const p of m.content) {
      switch (p.type) {
        case "compaction":
          lines.push(`[summary of the earlier conversation]\n${p.summary}`);
          break;
        case "text":
          if (p.text.trim() !== "") lines.push(`[${m.role}]\n${p.text}`);
          break;
        case "reasoning":
          break;
        case "tool-call":
          lines.push(`[tool call ${p.tool_call_id}] ${p.tool_name} ${JSON.stringify(p.args)}`);
          break;
        case "tool-result":
          lines.push(
            `[tool result ${p.tool_call_id}] ${cut(JSON.stringify(p.result), TRANSCRIPT_RESULT_MAX_BYTES)}`,
          );
          break;
        case "tool-batch-usage":
        case "compaction-usage":
          break;
        default: {
          const unreachable: never = p;
          void unreachable;
        }
      }
    }
  }
  const maxBytes = Math.floor(limitTokens * BYTES_PER_TOKEN * TRANSCRIPT_CONTEXT_SHARE);
  const transcript = cut(lines.join("\n\n"), maxBytes);
  return {
    system: COMPACTION_PROMPT,
    messages: [
      {
        role: "user",
        content: `Summarize this conversation for the agent to continue from.\n\n<conversation>\n${transcript}\n</conversation>`,
      },
    ],
    compacted,
  };
}

/** `text` with at most `maxBytes` bytes kept: its head and tail around a marker. */
function cut(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  const head = Math.floor((maxBytes * 2) / 3);
  const tail = maxBytes - head;
  return (
    bytes.subarray(0, head).toString("utf8") +
    `\n... [${bytes.length - maxBytes} bytes cut] ...\n` +
    bytes.subarray(bytes.length - tail).toString("utf8")
  );
}

/**
 * Whether an error is a provider refusing the prompt as longer than the model's context (the
 * wording differs by provider; all say "context" or "too long" with "token" or "prompt").
 */
export function isContextTooLong(err: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    const status = (e as { statusCode?: unknown }).statusCode;
    if (status !== undefined && status !== 400 && status !== 413 && status !== 422) continue;
    const body = (e as { responseBody?: unknown }).responseBody;
    const text = `${e.message} ${typeof body === "string" ? body : ""}`;
    if (
      /context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|too many tokens|exceeds the (model's )?context|input is too long|request too large/i.test(
        text,
      )
    )
      return true;
  }
  return false;
}

/** The turn's error once a compaction did not make the prompt fit. */
export class ContextTooLongError extends Error {
  override readonly name = "ContextTooLongError";
  constructor(limitTokens: number) {
    super(
      `The conversation is too long for the model's context (${limitTokens} tokens) even after ` +
        "compacting it: start a new chat, or use a model with a larger context.",
    );
  }
}
