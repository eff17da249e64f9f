// What a tool needs to run one call: the agent client, the call's identity and age, the
// clock, the agent answer timeout and the task's signal. A tool answers a result and whether
// its execution interval is billable (CHATD.md 9); runTool adds the interval itself.

import {
  toolCallUuid,
  type AgentClient,
  type ChatId,
  type Clock,
  type MessageId,
  type ToolCall,
  type ToolCallUuid,
} from "../../contract/index.ts";
import type { ToolResult } from "./results.ts";

export interface ToolContext {
  client: AgentClient;
  chatId: ChatId;
  /** The assistant message holding the call. */
  messageId: MessageId;
  /** How long ago the call was committed, from the database clock at dispatch. */
  toolCallAgeMs: number;
  /** Decides deadlines and stamps the execution interval. */
  clock: Clock;
  /** Bound on every start, edit, write and single read (CHATD.md 6; 1 minute in production). */
  agentAnswerTimeoutMs: number;
  /**
   * The task's signal. When it aborts, the tool stops waiting at once, sends nothing more
   * (the agent keeps working: C4) and throws the signal's reason.
   */
  signal: AbortSignal;
}

/** A tool's answer before runTool stamps the interval. */
export interface Handled<R extends ToolResult = ToolResult> {
  result: R;
  /** False when nothing ran: input errors, refusals, an agent that was never reached. */
  billable: boolean;
}

/** The client's tool call for the call's provider ID (the age comes from the context). */
export function toolCallOf(ctx: ToolContext, toolCallId: string): ToolCall {
  return {
    chatId: ctx.chatId,
    messageId: ctx.messageId,
    toolCallId,
    ageMs: ctx.toolCallAgeMs,
  };
}

export function uuidOf(ctx: ToolContext, toolCallId: string): ToolCallUuid {
  return toolCallUuid(ctx.chatId, ctx.messageId, toolCallId);
}

/** Call options for one request that must answer within the agent answer timeout. */
export function answerBound(ctx: ToolContext): { signal: AbortSignal; timeoutMs: number } {
  return { signal: ctx.signal, timeoutMs: ctx.agentAnswerTimeoutMs };
}
