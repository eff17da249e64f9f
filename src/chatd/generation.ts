// The generation task (CHATD.md 5): one action per task, chosen from history — run the
// latest assistant message's unresolved tool calls as one batch (batch-run.ts), compact
// (compaction-step.ts), finish the turn, or call the model once. Every commit moves history,
// so the runner starts the next task, which decides again; a stale task's commit fails its
// fence and writes nothing.

import type { Logger } from "pino";
import { assertNever, type AgentClient, type Clock } from "../contract/index.ts";
import type { LanguageModel } from "../model/index.ts";
import { batchStartWithCalls, runBatch } from "./batch-run.ts";
import { modelRequest, sendStep, type RecentSnapshots, type StepAhead } from "./step-ahead.ts";
import { startedWith } from "./batch-start.ts";
import { costMicros, type ModelPrices } from "./billing.ts";
import type { Chat, Fence } from "./chats.ts";
import type { Database } from "./db/index.ts";
import { chatSnapshot, compact, type StepSnapshot } from "./compaction-step.ts";
import {
  toolCallsIn,
  turnComplete,
  unresolvedToolCalls,
  AssistantParts,
  type ChatMessage,
  type NewMessage,
} from "./messages.ts";
import type { ChatdMetrics } from "./observe.ts";
import {
  compactionDue,
  compactionDueAfterStep,
  ContextTooLongError,
  contextBudget,
  isContextTooLong,
} from "./prompt/index.ts";
import type { MessageFeed } from "./message-feed.ts";
import type { StreamBuffer } from "./stream.ts";
import type { HeldChat, StepOptions } from "./transitions/index.ts";
import { attemptStopped } from "./worker/retry.ts";
import {
  commitFinalStep,
  commitStep,
  finishTurn,
  keptSnapshot,
  readForTask,
  recordGenerationAttempt,
} from "./transitions/index.ts";

export interface ResolvedModel {
  model: LanguageModel;
  /**
   * Whether a new chat may name it (an admin can disable a model: a chat that has it goes on
   * with it). A step is sent ahead for a new chat only when this is true (worker.ts).
   */
  enabled?: boolean;
  prices: ModelPrices;
  /**
   * The model's context limit in tokens: the model row's `context_limit`, else the provider's
   * known limit, else DEFAULT_CONTEXT_LIMIT_TOKENS (the default when absent).
   */
  contextLimitTokens?: number;
  /** Compact after a step whose prompt passed this percent of the limit (default 70; 100 = off). */
  compactThresholdPercent?: number;
}

export interface GenerationDeps {
  db: Database;
  clock: Clock;
  buffer: StreamBuffer;
  /** Bound on each start, edit, write or cancel request to an agent (CHATD.md 6). */
  agentAnswerTimeoutMs: number;
  /**
   * Tool results are cut to at most this many bytes before they are committed; a model with a
   * small context gets less (a tenth of its limit, prompt/compaction.ts).
   */
  toolResultBudgetBytes: number;
  /** The chat's model and its prices (what an assistant message's tokens cost). */
  resolveModel(chat: Pick<Chat, "modelConfigId">): Promise<ResolvedModel>;
  /** The chat's workspace agent, or undefined when the chat has none. */
  resolveAgent(chat: Chat): Promise<AgentClient | undefined>;
  /** This replica's log, `replica` bound: lines about tool calls, takeovers, interrupts. */
  log: Logger;
  /** This replica's metrics. */
  metrics: ChatdMetrics;
  /**
   * What the task's runner holds of its chat (transitions/held.ts): a task reads and writes
   * through it, so a step reads nothing the runner already has. Absent: every read is made.
   */
  held?: HeldChat;
  /** This replica's feed of committed messages, for its streams (message-feed.ts). */
  feed?: MessageFeed;
  /**
   * The context snapshot each workspace gave each model last here (step-ahead.ts): a step that
   * takes a new snapshot records it, and a new chat's first step is sent ahead with it.
   */
  snapshots?: RecentSnapshots;
  /**
   * Before a model step: resolves true once the chat's workspace can take tool calls, false
   * when it ended the turn itself (src/workspaces/readiness.ts). Absent: always ready.
   */
  workspaceReady?: (
    chat: Chat,
    history: ChatMessage[],
    fence: Fence,
    signal: AbortSignal,
  ) => Promise<boolean>;
}

/** Runs one generation action for the chat; resolves once it is committed. */
export async function generationTask(
  deps: GenerationDeps,
  fence: Fence,
  signal: AbortSignal,
): Promise<void> {
  // A model step sent as the last commit went out (step-ahead.ts) is this task's model step if
  // it sends the same request; whatever this task does instead, it is dropped.
  const ahead = deps.held?.takeStepAhead(fence);
  try {
    await generationAction(deps, fence, signal, ahead);
  } finally {
    ahead?.drop();
  }
}

async function generationAction(
  deps: GenerationDeps,
  fence: Fence,
  signal: AbortSignal,
  ahead: StepAhead | undefined,
): Promise<void> {
  const { chat, history } = await readForTask(deps.db, fence, deps.held);
  const open = unresolvedToolCalls(history);
  if (open) {
    // The snapshot was taken before the model step that made these calls (a chat from before
    // snapshots has none: its file tools then take absolute paths only).
    const kept = (await keptSnapshot(deps.db, chat.id, deps.held))?.snapshot;
    return runBatch(deps, fence, chat, history, open, signal, kept);
  }
  // Never while a call is unresolved (above): a compaction is the next action once one is due.
  let resolved: ResolvedModel | undefined;
  try {
    resolved = await deps.resolveModel(chat);
  } catch (err) {
    if (!turnComplete(history)) throw err; // a finished turn finishes without a model
  }
  if (resolved) {
    const budget = contextBudget(resolved);
    const due = compactionDue(history, chat.compactRequested ? "requested" : undefined, budget);
    if (due) return compact(deps, fence, history, resolved, budget, due, signal);
  }
  if (!resolved || turnComplete(history)) {
    await finishTurn(deps.db, fence, deps.held);
    return;
  }
  if (deps.workspaceReady && !(await deps.workspaceReady(chat, history, fence, signal))) return;
  const snapshot = await chatSnapshot(deps, chat, signal);
  return callModel(deps, fence, chat, history, signal, resolved, snapshot, ahead);
}

/** A step's prompt size as the provider reported it: input + cache read + cache write. */
function promptTokensOf(u: {
  inputTokens?: number | undefined;
  inputTokenDetails?: {
    noCacheTokens?: number | undefined;
    cacheReadTokens?: number | undefined;
    cacheWriteTokens?: number | undefined;
  };
}): number {
  const d = u.inputTokenDetails;
  const parts = [d?.noCacheTokens, d?.cacheReadTokens, d?.cacheWriteTokens];
  const detailed = parts.every((x) => x === undefined)
    ? undefined
    : parts.reduce<number>((a, x) => a + (x ?? 0), 0);
  return Math.max(u.inputTokens ?? 0, detailed ?? 0);
}

async function callModel(
  deps: GenerationDeps,
  fence: Fence,
  chat: Chat,
  history: ChatMessage[],
  signal: AbortSignal,
  resolved: ResolvedModel,
  snapshot: StepSnapshot,
  ahead: StepAhead | undefined,
): Promise<void> {
  try {
    await streamModelStep(deps, fence, chat, history, signal, resolved, snapshot, ahead);
  } catch (err) {
    if (signal.aborted || !isContextTooLong(err)) throw err;
    // The provider refused the prompt as too long: compact and try again, once. Right after a
    // compaction (or with nothing to compact) the turn fails with a clear last_error. The
    // failed step's episode is already ended (streamModelStep).
    const budget = contextBudget(resolved);
    const justCompacted = history.at(-1)?.boundary === true;
    if (justCompacted || !compactionDue(history, "context_too_long", budget)) {
      throw new ContextTooLongError(budget.limitTokens);
    }
    await compact(deps, fence, history, resolved, budget, "context_too_long", signal);
  }
}

async function streamModelStep(
  deps: GenerationDeps,
  fence: Fence,
  chat: Chat,
  history: ChatMessage[],
  signal: AbortSignal,
  resolved: ResolvedModel,
  { snapshot, keep }: StepSnapshot,
  ahead: StepAhead | undefined,
): Promise<void> {
  const budget = contextBudget(resolved);
  const attempt = await recordGenerationAttempt(deps.db, fence, deps.held);
  const attemptFence: Fence = { ...fence, generationAttempt: attempt };
  deps.buffer.begin(chat.id, fence.historyVersion, attempt);
  const { model, prices } = resolved;
  const parts = new AssistantParts();
  const request = modelRequest(snapshot, history);
  const early = ahead?.take(model, request, signal);
  // A snapshot taken for this step: the next new chat on the workspace sends its step with it.
  if (keep && chat.workspaceId) deps.snapshots?.remember(model, chat.workspaceId, snapshot);
  // The model window: from now until the answer is fully read. A step sent ahead is billed as
  // if it went out now, once its history is committed: the time it spent ahead is not billed.
  const opened = deps.clock.now();
  deps.buffer.modelStarted(chat.id, opened);
  try {
    let usage = { inputTokens: 0, outputTokens: 0 };
    let promptTokens = 0;
    const stream = early ?? sendStep(model, request, signal);
    for await (const p of stream) {
      switch (p.type) {
        case "text-delta":
          parts.text(p.text);
          deps.buffer.append(chat.id, { type: "text-delta", text: p.text });
          break;
        case "reasoning-delta":
          parts.reasoning(p.text);
          deps.buffer.append(chat.id, { type: "reasoning-delta", text: p.text });
          break;
        case "tool-call": {
          const call = { tool_call_id: p.toolCallId, tool_name: p.toolName, args: p.input };
          parts.toolCall(call);
          deps.buffer.append(chat.id, { type: "tool-call", ...call });
          break;
        }
        case "finish":
          usage = {
            inputTokens: p.usage.inputTokens ?? 0,
            outputTokens: p.usage.outputTokens ?? 0,
          };
          promptTokens = promptTokensOf(p.usage);
          break;
        default:
          assertNever(p);
      }
    }
    // A step whose signal aborted (a stop, an attempt timeout, a stale task) as it ended is not
    // the model's answer, even when the stream ran to its end.
    signal.throwIfAborted();
    const runtimeMs = deps.clock.now() - opened;
    const content = parts.parts();
    if (content.length === 0) content.push({ type: "text", text: "" });
    deps.metrics.modelStreamSeconds.observe(runtimeMs / 1000);
    const step: NewMessage[] = [
      {
        role: "assistant",
        visibility: "both",
        content,
        runtimeMs,
        ...usage,
        costMicros: costMicros(usage, prices),
        promptTokens,
        contextLimit: budget.limitTokens,
      },
    ];
    const calls = toolCallsIn(content);
    const start = calls.length > 0 ? await batchStartWithCalls(deps, chat, calls) : undefined;
    const o: StepOptions = {
      ...(keep && { keep: snapshot }),
      ...(start && { parts: [start.part] }),
    };
    // An answer without tool calls ends the turn, in the same statement unless a compaction
    // is due first (the next task's, as after any step).
    const ends =
      calls.length === 0 &&
      !compactionDueAfterStep(
        promptTokens,
        chat.compactRequested ? "requested" : undefined,
        budget,
      );
    const w = ends
      ? await commitFinalStep(deps.db, attemptFence, step, deps.held, o)
      : await commitStep(deps.db, attemptFence, step, deps.held, o);
    if (start) deps.held?.startedBatch(w.messages[0]!.id, startedWith(w.chat, w.also), start.audit);
  } catch (err) {
    // A stopped attempt's episode stays for the interrupt to bill; a failed one bills nothing.
    if (!attemptStopped(err, signal)) deps.buffer.end(chat.id);
    throw err;
  }
  deps.buffer.end(chat.id);
}
