// The cancel route (CONTRACT.md 7, Cancel): one route for every tool. A call the agent never
// received is recorded as canceled, so a start still in transit never runs; a call that ran
// is answered with its recorded response, and a running process is stopped only by the
// run-age rule, so work past its deadline and background work are never killed.

import {
  assertNever,
  parseToolCallHeaders,
  toolCallErrorBody,
  type CancelToolCallResponse,
  type ToolCallProcess,
} from "../../contract/index.ts";
import { errorAnswer, jsonAnswer } from "../answer.ts";
import { sendAnswer, type AgentResponse } from "../http-edge.ts";
import type { AgentRequest } from "../http-router.ts";
import { waitForRecord } from "./middleware.ts";
import { contextFor, type ToolCallStore } from "./store.ts";

/** Stops the process a tool call started, under the run-age rule. */
export interface ProcessStopper {
  /** Undefined when the call started no process (or it is gone). */
  stopToolCallProcess(
    processId: string,
    stopIfRunAgeBelowMs: number,
    signal: AbortSignal,
  ): Promise<ToolCallProcess | undefined>;
}

/** `stop_if_run_age_below_ms`: an integer; absent or null is 0; negative counts as 0. */
export function parseStopThreshold(
  body: Buffer,
): { ok: true; ms: number } | { ok: false; detail: string } {
  if (body.length === 0) return { ok: true, ms: 0 };
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, detail: "Request body must be valid JSON." };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, detail: "Request body must be a JSON object." };
  }
  const ms = (value as Record<string, unknown>).stop_if_run_age_below_ms;
  if (ms === undefined || ms === null) return { ok: true, ms: 0 };
  if (typeof ms !== "number" || !Number.isSafeInteger(ms)) {
    return {
      ok: false,
      detail: "stop_if_run_age_below_ms must be an integer number of milliseconds.",
    };
  }
  return { ok: true, ms: Math.max(0, ms) };
}

export function cancelRoute(store: ToolCallStore, stopper: ProcessStopper) {
  return async (request: AgentRequest, res: AgentResponse): Promise<void> => {
    const { enteredAt, chatId } = request;
    const pathId = request.params.id!;
    const parsed = parseToolCallHeaders(request.headers);
    switch (parsed.kind) {
      case "none":
        return sendAnswer(res, errorAnswer(400, "Cancel requires the tool call headers."));
      case "error":
        return sendAnswer(res, errorAnswer(400, "Invalid tool call headers.", parsed.detail));
      case "tool_call":
        break;
      default:
        return assertNever(parsed);
    }
    if (chatId === undefined) {
      return sendAnswer(
        res,
        errorAnswer(400, "Tool call headers require the Coder-Chat-Id header."),
      );
    }
    const threshold = parseStopThreshold(request.body);
    if (!threshold.ok) return sendAnswer(res, errorAnswer(400, threshold.detail));
    const { messageId, toolCallId, ageMs } = parsed.headers;
    const key = { chatId, messageId, toolCallId };
    const { uuid } = contextFor(key);
    if (pathId.toLowerCase() !== uuid) {
      return sendAnswer(
        res,
        errorAnswer(
          400,
          "The tool call ID in the path does not match the tool call headers.",
          `expected ${uuid} from Coder-Chat-Id and the tool call headers, got ${pathId}`,
        ),
      );
    }

    const decision = store.beginCancel(key, ageMs, enteredAt);
    switch (decision.kind) {
      case "refused":
        return sendAnswer(res, jsonAnswer(409, toolCallErrorBody(decision.code)));
      case "never_started":
        return sendAnswer(
          res,
          jsonAnswer(200, { started: false } satisfies CancelToolCallResponse),
        );
      case "started":
        break;
      default:
        return assertNever(decision);
    }
    const { record } = decision;
    const recorded = await waitForRecord(record, request, res);
    if (recorded === undefined) return; // the client went away: nothing is written
    const gone = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) gone.abort();
    };
    res.once("close", onClose);
    let process: ToolCallProcess | undefined;
    try {
      process = await stopper.stopToolCallProcess(uuid, threshold.ms, gone.signal);
    } catch {
      process = undefined;
    } finally {
      res.off("close", onClose);
    }
    if (gone.signal.aborted) return;
    const answer: CancelToolCallResponse = {
      started: true,
      status_code: recorded.status,
      content_type: recorded.contentType,
      body: recorded.body.toString("base64"),
    };
    if (process) answer.process = process;
    sendAnswer(res, jsonAnswer(200, answer), store.clock.now() - record.createdAt);
  };
}
