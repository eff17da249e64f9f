// The interrupt task (CHATD.md 8): keep what the model streamed, cancel every unresolved call
// that sent tool call headers (in parallel, each bounded, outside any transaction), and commit
// the real outcomes, the interrupted batch's usage (CHATD.md 9) and the end of the turn at once.

import { parseChatId, toMessageId, type AgentClient } from "../contract/index.ts";
import { batchMessages, toolCallAgeMs } from "./batch.ts";
import type { Interval } from "./billing.ts";
import type { Chat, Fence } from "./chats.ts";
import type { GenerationDeps } from "./generation.ts";
import type { ChatMessage, MessagePart, NewMessage, ToolCallPart } from "./messages.ts";
import { unresolvedToolCalls } from "./messages.ts";
import { toolResultsCommitted } from "./observe.ts";
import type { EpisodeView } from "./stream.ts";
import { errorResult, interruptResult, type ToolResult } from "./tools/index.ts";
import { finishInterruption, readForTask } from "./transitions.ts";

/** Runs the interrupt of an `interrupting` chat; resolves once the turn's end is committed. */
export async function interruptTask(
  deps: GenerationDeps,
  fence: Fence,
  signal: AbortSignal,
): Promise<void> {
  // One instant for the model window and the running calls' intervals (CHATD.md 9).
  const interruptedAt = deps.clock.now();
  const { chat, history } = await readForTask(deps.db, fence);
  const log = deps.log.child({ chat_id: chat.id });
  log.info("interrupt started");
  const messages: NewMessage[] = [];

  const episode = deps.buffer.episode(chat.id);
  const partial =
    episode &&
    episode.historyVersion === fence.historyVersion &&
    episode.attempt === chat.generationAttempt
      ? partialAssistant(episode, interruptedAt)
      : undefined;
  if (partial) messages.push(partial);

  const open = unresolvedToolCalls(history);
  if (open) messages.push(...(await cancelBatch(deps, fence, chat, open, signal, interruptedAt)));

  signal.throwIfAborted();
  const next = await finishInterruption(deps.db, fence, messages);
  const durationMs = deps.clock.now() - interruptedAt;
  deps.metrics.interruptSeconds.observe(durationMs / 1000);
  if (open)
    toolResultsCommitted(deps, parseChatId(chat.id)!, toMessageId(open.message.id)!, messages);
  log.info(
    { duration_ms: Math.round(durationMs), calls: open?.calls.length ?? 0, next },
    "interrupt committed",
  );
  deps.buffer.end(chat.id);
  deps.buffer.endBatch(chat.id);
}

/** The text the model streamed before the interrupt, or undefined when it streamed none. */
function partialAssistant(episode: EpisodeView, interruptedAt: number): NewMessage | undefined {
  let text = "";
  let reasoning = "";
  for (const e of episode.parts) {
    if (e.part.type === "text-delta") text += e.part.text;
    else if (e.part.type === "reasoning-delta") reasoning += e.part.text;
  }
  if (text === "") return undefined;
  const content: MessagePart[] = [];
  if (reasoning) content.push({ type: "reasoning", text: reasoning });
  content.push({ type: "text", text });
  const runtimeMs =
    episode.modelStartedAt === undefined ? 0 : Math.max(0, interruptedAt - episode.modelStartedAt);
  return { role: "assistant", visibility: "both", content, runtimeMs };
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
  // A call counts as started unless its cancel proves it never reached the agent.
  const started: boolean[] = open.calls.map(() => true);
  const results = await Promise.all(
    open.calls.map((call, i) =>
      resultFor(deps, client, chat, open.message, ageMs, signal, call, (s) => {
        started[i] = s;
      }),
    ),
  );
  // Without this replica's live stamps of the batch, it bills nothing (CHATD.md 9).
  const stamps = deps.buffer.batch(chat.id, fence.historyVersion);
  const billed: Interval[] = [];
  if (stamps) {
    open.calls.forEach((call, i) => {
      const s = stamps.get(call.toolCallId);
      if (!s) return; // never started on this replica
      if (s.endedAt !== undefined) {
        if (s.billable === true) billed.push({ start: s.startedAt, end: s.endedAt });
      } else if (started[i]) {
        billed.push({ start: s.startedAt, end: interruptedAt });
      }
    });
  }
  return batchMessages(open.calls, results, deps.toolResultBudgetBytes, billed);
}

async function resultFor(
  deps: GenerationDeps,
  client: AgentClient | undefined,
  chat: Chat,
  message: ChatMessage,
  toolCallAgeMs: number,
  signal: AbortSignal,
  call: ToolCallPart,
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
    },
    { toolCallId: call.toolCallId, toolName: call.toolName, input: call.args },
    { onStarted },
  );
}
