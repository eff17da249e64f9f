// The interrupt task (CHATD.md 8): keep what the model streamed (or bill an interrupted
// compaction's model time), cancel every unresolved call that sent tool call headers (in
// parallel, each bounded, outside any transaction), and commit the real outcomes, the
// interrupted batch's usage (CHATD.md 9) and the end of the turn at once.

import { parseChatId, toMessageId, type AgentClient } from "../contract/index.ts";
import { batchMessages, toolCallAgeMs } from "./batch.ts";
import type { Interval } from "./billing.ts";
import type { Chat, Fence } from "./chats.ts";
import { toolResultBudgetOf } from "./batch-run.ts";
import type { GenerationDeps } from "./generation.ts";
import type { ChatMessage, NewMessage, ToolCallPart } from "./messages.ts";
import { AssistantParts, unresolvedToolCalls } from "./messages.ts";
import { toolResultsCommitted } from "./observe.ts";
import type { EpisodeView } from "./stream.ts";
import { errorResult, interruptResult, unsentResult, type ToolResult } from "./tools/index.ts";
import { finishInterruption, keptSnapshot, readForTask } from "./transitions/index.ts";

/** Runs the interrupt of an `interrupting` chat; resolves once the turn's end is committed. */
export async function interruptTask(
  deps: GenerationDeps,
  fence: Fence,
  signal: AbortSignal,
): Promise<void> {
  // One instant for the model window and the running calls' intervals (CHATD.md 9).
  const interruptedAt = deps.clock.now();
  const { chat, history } = await readForTask(deps.db, fence, deps.held);
  const log = deps.log.child({ chat_id: chat.id });
  log.info("interrupt started");
  const messages: NewMessage[] = [];

  const episode = deps.buffer.episode(chat.id);
  if (
    episode &&
    episode.historyVersion === fence.historyVersion &&
    episode.attempt === chat.generationAttempt
  ) {
    messages.push(
      ...(episode.compaction
        ? compactionUsage(episode, interruptedAt)
        : partialAssistant(deps, episode, interruptedAt)),
    );
  }

  const open = unresolvedToolCalls(history);
  const batch = open ? await cancelBatch(deps, fence, chat, open, signal, interruptedAt) : [];
  messages.push(...batch);

  signal.throwIfAborted();
  const next = await finishInterruption(deps.db, fence, messages, undefined, deps.held);
  const durationMs = deps.clock.now() - interruptedAt;
  deps.metrics.interruptSeconds.observe(durationMs / 1000);
  if (open) toolResultsCommitted(deps, parseChatId(chat.id)!, toMessageId(open.message.id)!, batch);
  log.info(
    { duration_ms: Math.round(durationMs), calls: open?.calls.length ?? 0, next },
    "interrupt committed",
  );
  deps.buffer.end(chat.id);
  deps.buffer.endBatch(chat.id);
}

/**
 * What the model streamed before the interrupt, as an assistant message billed from stream
 * open to the interrupt instant: its text, and the tool calls it completed, each with a "not
 * run" result (a call runs only once its message is committed, so none reached the agent).
 * Nothing when the model streamed nothing.
 */
function partialAssistant(
  deps: GenerationDeps,
  episode: EpisodeView,
  interruptedAt: number,
): NewMessage[] {
  const parts = new AssistantParts();
  const calls: ToolCallPart[] = [];
  for (const { part } of episode.parts) {
    if (part.type === "text-delta") parts.text(part.text);
    else if (part.type === "reasoning-delta") parts.reasoning(part.text);
    else if (part.type === "tool-call") {
      parts.toolCall(part);
      calls.push({ toolCallId: part.tool_call_id, toolName: part.tool_name, args: part.args });
    }
  }
  const content = parts.parts();
  if (!content.some((p) => p.type === "text" || p.type === "tool-call")) return [];
  const runtimeMs =
    episode.modelStartedAt === undefined ? 0 : Math.max(0, interruptedAt - episode.modelStartedAt);
  return [
    { role: "assistant", visibility: "both", content, runtimeMs },
    ...batchMessages(
      calls,
      calls.map((c) => unsentResult(c.toolName)),
      deps.toolResultBudgetBytes,
      calls.map(() => undefined),
    ),
  ];
}

/**
 * An interrupted compaction's model window, from stream open to the interrupt instant, as a
 * usage record (no boundary: its summary is dropped, the next turn decides again). Its tokens
 * are not known: a provider reports them when the stream ends. No record for 0 ms.
 */
function compactionUsage(episode: EpisodeView, interruptedAt: number): NewMessage[] {
  if (episode.modelStartedAt === undefined) return [];
  const billedMs = Math.max(0, Math.round(interruptedAt - episode.modelStartedAt));
  if (billedMs === 0) return [];
  return [
    {
      role: "system",
      visibility: "model",
      content: [{ type: "compaction-usage", billed_ms: billedMs }],
      runtimeMs: billedMs,
    },
  ];
}

/** One result message per unresolved call, in call order, then the usage record if billable. */
async function cancelBatch(
  deps: GenerationDeps,
  fence: Fence,
  chat: Chat,
  open: { message: ChatMessage; calls: ToolCallPart[] },
  signal: AbortSignal,
  interruptedAt: number,
): Promise<NewMessage[]> {
  const client = await deps.resolveAgent(chat);
  const ageMs = await toolCallAgeMs(deps.db, open.message.id);
  const workspaceDir = (await keptSnapshot(deps.db, chat.id, deps.held))?.snapshot.environment
    ?.directory;
  // A call counts as started unless its cancel proves it never reached the agent.
  const started: boolean[] = open.calls.map(() => true);
  const results = await Promise.all(
    open.calls.map((call, i) =>
      resultFor(deps, client, chat, open.message, ageMs, signal, call, workspaceDir, (s) => {
        started[i] = s;
      }),
    ),
  );
  // Without this replica's live stamps of the batch, it bills nothing (CHATD.md 9).
  const stamps = deps.buffer.batch(chat.id, fence.historyVersion);
  const intervals = open.calls.map((call, i): Interval | undefined => {
    const s = stamps?.get(call.toolCallId);
    if (!s) return undefined; // never started on this replica
    if (s.endedAt !== undefined)
      return s.billable === true ? { start: s.startedAt, end: s.endedAt } : undefined;
    return started[i] ? { start: s.startedAt, end: interruptedAt } : undefined;
  });
  return batchMessages(open.calls, results, await toolResultBudgetOf(deps, chat), intervals);
}

async function resultFor(
  deps: GenerationDeps,
  client: AgentClient | undefined,
  chat: Chat,
  message: ChatMessage,
  toolCallAgeMs: number,
  signal: AbortSignal,
  call: ToolCallPart,
  workspaceDir: string | undefined,
  onStarted: (started: boolean) => void,
): Promise<ToolResult> {
  if (!client) {
    return errorResult("This chat has no workspace, so the call did not run.");
  }
  return interruptResult(
    {
      client,
      chatId: parseChatId(chat.id)!,
      messageId: toMessageId(message.id)!,
      toolCallAgeMs,
      clock: deps.clock,
      agentAnswerTimeoutMs: deps.agentAnswerTimeoutMs,
      signal,
      ...(workspaceDir !== undefined && { workspaceDir }),
    },
    { toolCallId: call.toolCallId, toolName: call.toolName, input: call.args },
    { onStarted },
  );
}
