// The process tools: execute (through the contract: the process ID is the tool call UUID and
// the deadline counts from the agent's first run, C6), process_output, process_list and
// process_signal (chat-scoped, no tool call headers). Waits end at a deadline or the task's abort.

import {
  assertNever,
  isLostAnswer,
  sleep,
  type ProcessOutputResponse,
  type StartProcessRequest,
} from "../../contract/index.ts";
import {
  answerBound,
  resending,
  RESEND_PAUSES_MS,
  toolCallOf,
  uuidOf,
  type Handled,
  type ToolContext,
} from "./context.ts";
import { PLAIN_OUTPUT_ENV, plainOutput } from "./ansi.ts";
import type { ToolInput } from "./declarations.ts";
import { formatDuration } from "./duration.ts";
import {
  billableRead,
  classifyAgentError,
  readFailureMessage,
  type AgentFailure,
} from "./failures.ts";
import {
  backgroundResult,
  errorResult,
  timedOutResult,
  unknownProcessResult,
  type ExecuteResult,
  type ProcessCompleted,
  type ProcessListResult,
  type ProcessOutputResult,
  type ProcessSignalResult,
} from "./results.ts";

/** The least time between two output requests when the agent answers "running" early. */
const MIN_POLL_INTERVAL_MS = 250;

/** The abort reason of a wait that reached its deadline (never the task's). */
class DeadlineReached extends Error {}

export async function runExecute(
  ctx: ToolContext,
  toolCallId: string,
  input: ToolInput<"execute">,
  timeoutMs: number,
): Promise<Handled<ExecuteResult>> {
  const uuid = uuidOf(ctx, toolCallId);
  const request: StartProcessRequest = { command: input.command, env: { ...PLAIN_OUTPUT_ENV } };
  if (input.workdir !== undefined) request.workdir = input.workdir;
  if (input.run_in_background === true) request.background = true;

  let start: { id: string; runAgeMs: number };
  try {
    // A repeat of this start (a task retry, another replica) is answered from the agent's
    // record: the same process, and the run age of its first start.
    start = await resending(ctx, (bound, laterMs) =>
      ctx.client.startProcess(request, { toolCall: toolCallOf(ctx, toolCallId, laterMs) }, bound),
    );
  } catch (err) {
    const f = classifyAgentError(err, ctx.signal);
    switch (f.kind) {
      case "unknown":
        return { result: unknownProcessResult(f.reason, uuid, f.detail), billable: f.billable };
      case "http":
        return { result: errorResult(`The command did not run: ${f.message}`), billable: false };
      default:
        return assertNever(f);
    }
  }
  const answeredAt = ctx.clock.now();
  // US8: an agent without the contract names the process itself (no replay guarantees); its
  // ID is then the process ID, and everything else goes on as usual.
  const processId = typeof start.id === "string" && start.id !== "" ? start.id : uuid;
  if (input.run_in_background === true) {
    return { result: backgroundResult(processId), billable: true };
  }

  // C6: the deadline counts from the agent's first run of this call, not from this attempt.
  const deadline = answeredAt + timeoutMs - start.runAgeMs;
  const runAge = () => Math.max(0, Math.round(start.runAgeMs + (ctx.clock.now() - answeredAt)));
  try {
    const exited = await waitForExit(ctx, processId, deadline);
    if (exited)
      return { result: { ...completed(exited), wall_duration_ms: runAge() }, billable: true };
    // At the deadline: one plain read says what the process is doing now.
    const now = await resending(ctx, (bound) =>
      ctx.client.processOutput(processId, { chatId: ctx.chatId }, bound),
    );
    if (!now.running)
      return { result: { ...completed(now), wall_duration_ms: runAge() }, billable: true };
    const why = `The command is still running after its timeout of ${formatDuration(timeoutMs)}.`;
    return { result: timedOutResult(processId, now, why), billable: true };
  } catch (err) {
    // The process started; only its state is unknown (US5: never guess "timed out").
    const f = classifyAgentError(err, ctx.signal);
    return {
      result: unknownProcessResult(unknownReasonOf(f), processId, detailOf(f)),
      billable: true,
    };
  }
}

export async function runProcessOutput(
  ctx: ToolContext,
  input: ToolInput<"process_output">,
  waitMs: number,
): Promise<Handled<ProcessOutputResult>> {
  const id = input.process_id;
  try {
    const exited = waitMs > 0 ? await waitForExit(ctx, id, ctx.clock.now() + waitMs) : undefined;
    const out =
      exited ??
      (await resending(ctx, (bound) =>
        ctx.client.processOutput(id, { chatId: ctx.chatId }, bound),
      ));
    if (!out.running) return { result: completed(out), billable: true };
    const why =
      waitMs > 0
        ? `The process is still running after waiting ${formatDuration(waitMs)}.`
        : "The process is still running.";
    return { result: timedOutResult(id, out, why), billable: true };
  } catch (err) {
    const f = classifyAgentError(err, ctx.signal);
    if (f.kind === "http" && f.status === 404) {
      const message =
        `Process "${id}" was not found: it may have exited more than 5 minutes ago and been ` +
        "reaped, or it belongs to another chat. Use process_list to see this chat's processes.";
      return { result: errorResult(message), billable: false };
    }
    return { result: errorResult(readFailureMessage(f)), billable: billableRead(f) };
  }
}

export async function runProcessList(ctx: ToolContext): Promise<Handled<ProcessListResult>> {
  try {
    const { processes } = await resending(ctx, (bound) =>
      ctx.client.listProcesses({ chatId: ctx.chatId }, bound),
    );
    return { result: { status: "completed", processes }, billable: true };
  } catch (err) {
    const f = classifyAgentError(err, ctx.signal);
    return { result: errorResult(readFailureMessage(f)), billable: billableRead(f) };
  }
}

export async function runProcessSignal(
  ctx: ToolContext,
  input: ToolInput<"process_signal">,
): Promise<Handled<ProcessSignalResult>> {
  const id = input.process_id;
  try {
    const { message } = await ctx.client.signalProcess(
      id,
      input.signal,
      { chatId: ctx.chatId },
      answerBound(ctx),
    );
    return { result: { status: "completed", message }, billable: true };
  } catch (err) {
    const f = classifyAgentError(err, ctx.signal);
    switch (f.kind) {
      case "http":
        return {
          result: errorResult(
            f.status === 404
              ? `Process "${id}" was not found (reaped, or another chat's). Use process_list.`
              : f.message,
          ),
          billable: false,
        };
      case "unknown":
        // A signal is a side effect: say only what is known.
        return {
          result: errorResult(
            `${f.detail} The signal may or may not have been delivered; check the process ` +
              `with process_output or process_list before signaling it again.`,
          ),
          billable: f.billable,
        };
      default:
        return assertNever(f);
    }
  }
}

/**
 * Waits with `wait=true` until the process exits (its final output) or `deadline` on the
 * context's clock passes (undefined). Agent errors and the task's abort are thrown.
 */
async function waitForExit(
  ctx: ToolContext,
  id: string,
  deadline: number,
): Promise<ProcessOutputResponse | undefined> {
  let lost = 0; // connections lost in a row
  for (;;) {
    const remaining = deadline - ctx.clock.now();
    if (remaining <= 0) return undefined;
    const bound = new AbortController();
    const timer = ctx.clock.setTimer(remaining, () => bound.abort(new DeadlineReached()));
    const signal = AbortSignal.any([ctx.signal, bound.signal]);
    const asked = ctx.clock.now();
    try {
      const out = await ctx.client.processOutput(
        id,
        { chatId: ctx.chatId, wait: true },
        // The clock's deadline ends the wait; the request bound is only a backstop.
        { signal, timeoutMs: remaining + ctx.agentAnswerTimeoutMs },
      );
      if (!out.running) return out;
      lost = 0;
      // The agent's own wait bound ran out, or it does not wait: ask again, not in a hot loop.
      const pause = MIN_POLL_INTERVAL_MS - (ctx.clock.now() - asked);
      if (pause > 0) await sleep(ctx.clock, pause, signal);
    } catch (err) {
      if (bound.signal.aborted && !ctx.signal.aborted) return undefined;
      // A lost connection is asked again (a read is safe to repeat), as resending() would.
      const pause = RESEND_PAUSES_MS[lost++];
      if (!isLostAnswer(err) || pause === undefined) throw err;
      await sleep(ctx.clock, Math.min(pause, Math.max(0, deadline - ctx.clock.now())), ctx.signal);
    } finally {
      timer.cancel();
    }
  }
}

function completed(out: ProcessOutputResponse): ProcessCompleted {
  // The contract sets exit_code on every exited process; −1 (a signal) is the safe reading.
  const r: ProcessCompleted = {
    status: "completed",
    exit_code: out.exit_code ?? -1,
    output: plainOutput(out.output),
  };
  if (out.truncated) r.truncated = out.truncated;
  return r;
}

function unknownReasonOf(f: AgentFailure) {
  return f.kind === "unknown" ? f.reason : "agent_error";
}

function detailOf(f: AgentFailure): string {
  return f.kind === "unknown" ? f.detail : f.message;
}
