// The tool batch action of the generation task (CHATD.md 5, 6): the latest assistant message's
// unresolved calls, sent to the workspace agent concurrently once the batch's start
// (batch-start.ts) finds the workspace usable, their results committed together with the next
// model call's attempt, while that call goes out (step-ahead.ts). Live parts show each call
// start and finish; this replica's stamps of the calls bill the batch if it is interrupted
// (CHATD.md 9).

import { parseChatId, toMessageId, toolCallUuid } from "../contract/index.ts";
import { batchStartPart, refuseBatch, startBatch } from "./batch-start.ts";
import { batchMessages } from "./batch.ts";
import type { Chat, Fence } from "./chats.ts";
import type { GenerationDeps, ResolvedModel } from "./generation.ts";
import type { ChatMessage, NewMessage, ToolCallPart } from "./messages.ts";
import { toolCallFields, toolResultsCommitted } from "./observe.ts";
import { contextBudget, toolResultBudgetBytes, type ContextSnapshot } from "./prompt/index.ts";
import { sendAhead, type StepAhead } from "./step-ahead.ts";
import { runTool, type ToolOutcome } from "./tools/index.ts";
import { commitStep, type ChangePart, type Written } from "./transitions/index.ts";

/**
 * The start of the batch of `calls`, to ride on the commit of the step that makes them
 * (batch-start.ts); undefined when the chat's agent cannot be resolved now (the batch's task
 * then starts it on its own).
 */
export async function batchStartWithCalls(
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
    const budget = contextBudget(await deps.resolveModel(chat));
    return toolResultBudgetBytes(budget.limitTokens, deps.toolResultBudgetBytes);
  } catch {
    return deps.toolResultBudgetBytes;
  }
}

export async function runBatch(
  deps: GenerationDeps,
  fence: Fence,
  chat: Chat,
  history: ChatMessage[],
  { message, calls }: { message: ChatMessage; calls: ToolCallPart[] },
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
      deps.log.info(
        { ...toolCallFields(chatId, messageId, call.toolCallId), tool: call.toolName },
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
  // The model takes the results next: its attempt is recorded with them, and its request goes
  // out while they commit (step-ahead.ts).
  const ahead = await stepAheadOf(deps, chat, history, messages);
  let w: Written;
  try {
    w = await commitStep(deps.db, fence, messages, deps.held, { nextAttempt: true });
  } catch (err) {
    ahead?.drop();
    throw err;
  }
  if (ahead) deps.held!.sentAhead(ahead, w.chat.historyVersion);
  deps.buffer.end(chat.id);
  toolResultsCommitted(deps, chatId, messageId, messages);
  deps.buffer.endBatch(chat.id);
}

/**
 * The model step that reads `results` after `history`, sent now, when that is what the task
 * after their commit will do: the chat's model resolves, its context snapshot is held, and no
 * compaction is due (step-ahead.ts). Undefined otherwise, and without a held chat.
 */
async function stepAheadOf(
  deps: GenerationDeps,
  chat: Chat,
  history: ChatMessage[],
  results: NewMessage[],
): Promise<StepAhead | undefined> {
  const snapshot = deps.held?.snapshot?.snapshot;
  if (!snapshot) return undefined;
  let resolved: ResolvedModel;
  try {
    resolved = await deps.resolveModel(chat);
  } catch {
    return undefined; // the next task reports it
  }
  return sendAhead(resolved.model, contextBudget(resolved), snapshot, history, results, {
    compactRequested: chat.compactRequested,
    clock: deps.clock,
  });
}
