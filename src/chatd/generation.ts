// The generation task (CHATD.md 5): one action per task, chosen from history — run the
// latest assistant message's unresolved tool calls as one batch, finish the turn, or call
// the model once. Every commit moves history, so the runner starts the next task, which
// decides again; a stale task's commit fails its fence and writes nothing.

import { streamText, type LanguageModel } from "ai";
import type { Logger } from "pino";
import type { AgentClient, Clock } from "../contract/index.ts";
import { parseChatId, toMessageId, toolCallUuid } from "../contract/index.ts";
import { batchStartPart, refuseBatch, startBatch, startedWith } from "./batch-start.ts";
import { batchMessages } from "./batch.ts";
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
  type ToolCallPart,
} from "./messages.ts";
import { toolCallLog, toolResultsCommitted, type ChatdMetrics } from "./observe.ts";
import {
  compactionDue,
  compactionDueAfterStep,
  ContextTooLongError,
  DEFAULT_COMPACT_THRESHOLD_PERCENT,
  DEFAULT_CONTEXT_LIMIT_TOKENS,
  isContextTooLong,
  systemPrompt,
  toModelMessages,
  toolResultBudgetBytes,
  type ContextBudget,
  type ContextSnapshot,
} from "./prompt/index.ts";
import type { MessageFeed } from "./message-feed.ts";
import type { StreamBuffer } from "./stream.ts";
import type { ChangePart, HeldChat, StepOptions } from "./transitions/index.ts";
import { attemptStopped } from "./worker/retry.ts";
import { runTool, toolDeclarations, type ToolOutcome } from "./tools/index.ts";
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
  prices: ModelPrices;
  /**
   * The model's context limit in tokens: the model row's `context_limit`, else the provider's
   * known limit, else DEFAULT_CONTEXT_LIMIT_TOKENS (the default when absent).
   */
  contextLimitTokens?: number;
  /** Compact after a step whose prompt passed this percent of the limit (default 70; 100 = off). */
  compactThresholdPercent?: number;
}

function budgetOf(m: ResolvedModel): ContextBudget {
  return {
    limitTokens: m.contextLimitTokens ?? DEFAULT_CONTEXT_LIMIT_TOKENS,
    thresholdPercent: m.compactThresholdPercent ?? DEFAULT_COMPACT_THRESHOLD_PERCENT,
  };
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
  resolveModel(chat: Chat): Promise<ResolvedModel>;
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
  const { chat, history } = await readForTask(deps.db, fence, deps.held);
  const open = unresolvedToolCalls(history);
  if (open) {
    // The snapshot was taken before the model step that made these calls (a chat from before
    // snapshots has none: its file tools then take absolute paths only).
    const kept = (await keptSnapshot(deps.db, chat.id, deps.held))?.snapshot;
    return runBatch(deps, fence, chat, open.message, open.calls, signal, kept);
  }
  // Never while a call is unresolved (above): a compaction is the next action once one is due.
  let resolved: ResolvedModel | undefined;
  try {
    resolved = await deps.resolveModel(chat);
  } catch (err) {
    if (!turnComplete(history)) throw err; // a finished turn finishes without a model
  }
  if (resolved) {
    const budget = budgetOf(resolved);
    const due = compactionDue(history, chat.compactRequested ? "requested" : undefined, budget);
    if (due) return compact(deps, fence, history, resolved, budget, due, signal);
  }
  if (!resolved || turnComplete(history)) {
    await finishTurn(deps.db, fence, deps.held);
    return;
  }
  if (deps.workspaceReady && !(await deps.workspaceReady(chat, history, fence, signal))) return;
  const snapshot = await chatSnapshot(deps, chat, signal);
  return callModel(deps, fence, chat, history, signal, resolved, snapshot);
}

/**
 * The start of the batch of `calls`, to ride on the commit of the step that makes them
 * (batch-start.ts); undefined when the chat's agent cannot be resolved now (the batch's task
 * then starts it on its own).
 */
async function batchStartWithCalls(
  deps: GenerationDeps,
  chat: Chat,
  calls: ToolCallPart[],
): Promise<{ part: ChangePart; audit: boolean } | undefined> {
  let audit: boolean;
  try {
    audit = (await deps.resolveAgent(chat)) !== undefined;
  } catch {
    return undefined;
  }
  return { part: batchStartPart(calls, { audit }), audit };
}

/**
 * How many bytes one tool result of this chat may take: a tenth of its model's context, never
 * more than the server's budget (the server's budget when the model cannot be resolved).
 */
export async function toolResultBudgetOf(deps: GenerationDeps, chat: Chat): Promise<number> {
  try {
    const budget = budgetOf(await deps.resolveModel(chat));
    return toolResultBudgetBytes(budget.limitTokens, deps.toolResultBudgetBytes);
  } catch {
    return deps.toolResultBudgetBytes;
  }
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
): Promise<void> {
  try {
    await streamModelStep(deps, fence, chat, history, signal, resolved, snapshot);
  } catch (err) {
    if (signal.aborted || !isContextTooLong(err)) throw err;
    // The provider refused the prompt as too long: compact and try again, once. Right after a
    // compaction (or with nothing to compact) the turn fails with a clear last_error. The
    // failed step's episode is already ended (streamModelStep).
    const budget = budgetOf(resolved);
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
): Promise<void> {
  const budget = budgetOf(resolved);
  const attempt = await recordGenerationAttempt(deps.db, fence, deps.held);
  const attemptFence: Fence = { ...fence, generationAttempt: attempt };
  deps.buffer.begin(chat.id, fence.historyVersion, attempt);
  const { model, prices } = resolved;
  const parts = new AssistantParts();
  // The model window: from just before the stream opens until it is fully read.
  const opened = deps.clock.now();
  deps.buffer.modelStarted(chat.id, opened);
  try {
    const result = streamText({
      model,
      system: systemPrompt(snapshot),
      messages: toModelMessages(history),
      tools: toolDeclarations(),
      abortSignal: signal,
      // The worker retries (and honours Retry-After); the SDK's default onError would print the
      // whole error, the prompt in it, to the console.
      maxRetries: 0,
      onError: () => undefined,
    });
    let usage = { inputTokens: 0, outputTokens: 0 };
    let promptTokens = 0;
    for await (const p of result.fullStream) {
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
            inputTokens: p.totalUsage.inputTokens ?? 0,
            outputTokens: p.totalUsage.outputTokens ?? 0,
          };
          promptTokens = promptTokensOf(p.totalUsage);
          break;
        case "error":
          throw p.error instanceof Error ? p.error : new Error(String(p.error));
        default:
          break;
      }
    }
    // A stream cut off by our own abort (a stop, an attempt timeout, a stale task) ends with an
    // `abort` part rather than an error: what it holds is not the model's answer.
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

async function runBatch(
  deps: GenerationDeps,
  fence: Fence,
  chat: Chat,
  message: ChatMessage,
  calls: ToolCallPart[],
  signal: AbortSignal,
  snapshot: ContextSnapshot | undefined,
): Promise<void> {
  const client = await deps.resolveAgent(chat);
  // Right before anything reaches the agent, on every attempt: may the owner still use it? The
  // first start rode on the commit of the calls (if that was a moment ago, HeldChat).
  const rode = deps.held?.takeBatchStart(message.id);
  const { access, ageMs } =
    rode && rode.audit === !!client
      ? rode
      : await startBatch(deps.db, chat, message, calls, { audit: !!client });
  if (access.status === "lost") return refuseBatch(deps, fence, chat, calls, access.why);
  const workspaceDir = snapshot?.environment?.directory;
  const chatId = parseChatId(chat.id)!;
  const messageId = toMessageId(message.id)!;
  // Watchers see each call start and finish as live parts of the batch's own episode; this
  // replica's stamps of the batch bill it if it is interrupted (CHATD.md 9).
  deps.buffer.begin(chat.id, fence.historyVersion, chat.generationAttempt);
  deps.buffer.beginBatch(chat.id, fence.historyVersion);
  const outcomes = await Promise.all(
    calls.map(async (call): Promise<ToolOutcome> => {
      if (!client) {
        const now = deps.clock.now();
        return {
          result: {
            status: "error",
            message: "This chat has no workspace, so tools cannot run. Answer without tools.",
          },
          startedAt: now,
          endedAt: now,
          billable: false,
        };
      }
      toolCallLog(deps.log, chatId, messageId, call.toolCallId).info(
        { tool: call.toolName },
        "tool call sent",
      );
      deps.buffer.stampCall(chat.id, call.toolCallId, { startedAt: deps.clock.now() });
      // The agent names an execute's process by the tool call UUID (CONTRACT.md 3), so a
      // watcher can read the output of the command while it runs.
      deps.buffer.append(chat.id, {
        type: "tool-started",
        tool_call_id: call.toolCallId,
        tool_name: call.toolName,
        ...(call.toolName === "execute" && {
          process_id: toolCallUuid(chatId, messageId, call.toolCallId),
        }),
      });
      const outcome = await runTool(
        {
          client,
          chatId,
          messageId,
          toolCallAgeMs: ageMs,
          clock: deps.clock,
          agentAnswerTimeoutMs: deps.agentAnswerTimeoutMs,
          signal,
          ...(workspaceDir !== undefined && { workspaceDir }),
        },
        { toolCallId: call.toolCallId, toolName: call.toolName, input: call.args },
      );
      // After a task retry on this replica the call's interval is its first one (CHATD.md 9).
      const stamped = deps.buffer.stampCall(chat.id, call.toolCallId, {
        startedAt: outcome.startedAt,
        endedAt: outcome.endedAt,
        billable: outcome.billable,
      });
      deps.buffer.append(chat.id, {
        type: "tool-finished",
        tool_call_id: call.toolCallId,
        tool_name: call.toolName,
        status: outcome.result.status,
      });
      return {
        ...outcome,
        startedAt: stamped.startedAt,
        endedAt: stamped.endedAt ?? outcome.endedAt,
      };
    }),
  );
  const messages = batchMessages(
    calls,
    outcomes.map((o) => o.result),
    await toolResultBudgetOf(deps, chat),
    outcomes.map((o) => (o.billable ? { start: o.startedAt, end: o.endedAt } : undefined)),
  );
  // The model takes the results next: its attempt is recorded with them.
  await commitStep(deps.db, fence, messages, deps.held, { nextAttempt: true });
  deps.buffer.end(chat.id);
  toolResultsCommitted(deps, chatId, messageId, messages);
  deps.buffer.endBatch(chat.id);
}
