// What a tool needs to run one call: the agent client, the call's identity and age, the
// clock, the agent answer timeout and the task's signal. A tool answers a result and whether
// its execution interval is billable (CHATD.md 9); runTool adds the interval itself.

import path from "node:path";
import {
  isLostAnswer,
  sleep,
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
  /**
   * The workspace directory (absolute) from the chat's context snapshot: relative paths of the
   * file tools start here. Undefined when the agent did not report it.
   */
  workspaceDir?: string;
}

/**
 * `p` as an absolute path: as given when absolute, else resolved against the workspace
 * directory; a message for the model when it is relative and the directory is unknown.
 */
export function absolutePath(
  ctx: ToolContext,
  p: string,
): { ok: true; path: string } | { ok: false; message: string } {
  if (path.posix.isAbsolute(p)) return { ok: true, path: path.posix.normalize(p) };
  if (ctx.workspaceDir === undefined) {
    return {
      ok: false,
      message: `The path "${p}" is relative and the workspace directory is not known: use an absolute path (run \`pwd\` to learn it).`,
    };
  }
  return { ok: true, path: path.posix.resolve(ctx.workspaceDir, p) };
}

/** A tool's answer before runTool stamps the interval. */
export interface Handled<R extends ToolResult = ToolResult> {
  result: R;
  /** False when nothing ran: input errors, refusals, an agent that was never reached. */
  billable: boolean;
}

/**
 * The client's tool call for the call's provider ID. Its age is the context's, plus `laterMs`
 * for a request sent that long after the first one (the call is that much older by then).
 */
export function toolCallOf(ctx: ToolContext, toolCallId: string, laterMs = 0): ToolCall {
  return {
    chatId: ctx.chatId,
    messageId: ctx.messageId,
    toolCallId,
    ageMs: ctx.toolCallAgeMs + laterMs,
  };
}

export function uuidOf(ctx: ToolContext, toolCallId: string): ToolCallUuid {
  return toolCallUuid(ctx.chatId, ctx.messageId, toolCallId);
}

/** Call options for one request that must answer within the agent answer timeout. */
export function answerBound(ctx: ToolContext): { signal: AbortSignal; timeoutMs: number } {
  return { signal: ctx.signal, timeoutMs: ctx.agentAnswerTimeoutMs };
}

/** The pauses before sending a request again after its connection failed. */
export const RESEND_PAUSES_MS = [100, 300, 900];

/**
 * Sends a request that is safe to send again, and sends it again when the connection was lost
 * after the request went out (the request or its answer lost on the way, a stale keep-alive
 * connection), so that a lost answer becomes the real one instead of an unknown result. Safe:
 * a tool call's start, edit, write or cancel (the agent answers a repeat from its record of
 * the first, CONTRACT.md 5), or a read. At most `RESEND_PAUSES_MS.length` more times, all
 * within one agent answer timeout from the first send. `send` gets its call options and how
 * long after the first send it goes out (to add to the tool call's age: an age that is too
 * young could let a restarted agent run a call it cannot vouch for). An agent that cannot be
 * connected to is not tried again (its result says so at once), nor one that did not answer
 * in time; those errors, and the last lost connection, are thrown.
 */
export async function resending<T>(
  ctx: ToolContext,
  send: (bound: { signal: AbortSignal; timeoutMs: number }, laterMs: number) => Promise<T>,
): Promise<T> {
  const first = ctx.clock.now();
  for (let resent = 0; ; resent++) {
    const laterMs = ctx.clock.now() - first;
    try {
      return await send(
        { signal: ctx.signal, timeoutMs: Math.max(1, ctx.agentAnswerTimeoutMs - laterMs) },
        laterMs,
      );
    } catch (err) {
      const pause = RESEND_PAUSES_MS[resent];
      const resend =
        isLostAnswer(err) &&
        !ctx.signal.aborted &&
        pause !== undefined &&
        ctx.clock.now() - first + pause < ctx.agentAnswerTimeoutMs;
      if (!resend) throw err;
      await sleep(ctx.clock, pause, ctx.signal);
    }
  }
}
