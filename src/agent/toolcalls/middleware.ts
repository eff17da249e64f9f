// The tool call middleware (CONTRACT.md 6): wraps the start, edit and write routes so each
// tool call's handler runs at most once in the agent's lifetime, and every repeat of the
// request gets the one recorded answer back — byte for byte, with the run age.

import { createHash } from "node:crypto";
import { parseToolCallHeaders, toolCallErrorBody, type ChatId } from "../../contract/index.ts";
import { errorAnswer, jsonAnswer, type Answer } from "../answer.ts";
import { sendAnswer, type AgentResponse } from "../http-edge.ts";
import type { AgentRequest } from "../http-router.ts";
import {
  contextFor,
  type ToolCallContext,
  type ToolCallRecord,
  type ToolCallStore,
} from "./store.ts";

/** What a wrapped route sees: the request's exact body bytes, before anything is decided. */
export interface RequestInput {
  body: Buffer;
  query: AgentRequest["query"];
  chatId: ChatId | undefined;
  /** Store-clock instant the request entered; for a new tool call, the record's `createdAt`. */
  enteredAt: number;
}

/**
 * A route checks its input first: bad input is answered at once and records nothing; good
 * input gives the run, which the middleware calls at most once per tool call.
 */
export type Prepared =
  | { kind: "answer"; answer: Answer }
  | { kind: "run"; run: (toolCall: ToolCallContext | undefined) => Promise<Answer> };

export type Route = (input: RequestInput) => Prepared;

export const HANDLER_FAILED_MESSAGE = "The tool call handler failed.";

/**
 * SHA-256 over method, raw path, raw query and body (the strings as UTF-8), each preceded by
 * its length in bytes (uint64 BE).
 */
export function inputHash(method: string, rawUrl: string, body: Buffer): Buffer {
  const q = rawUrl.indexOf("?");
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? "" : rawUrl.slice(q + 1);
  const h = createHash("sha256");
  // `update` copies what it is given, so one length buffer serves every part.
  const len = Buffer.allocUnsafe(8);
  for (const part of [method, path, query, body]) {
    const n = typeof part === "string" ? Buffer.byteLength(part) : part.length;
    len.writeUInt32BE(Math.floor(n / 2 ** 32), 0);
    len.writeUInt32BE(n >>> 0, 4);
    h.update(len).update(part);
  }
  return h.digest();
}

/** Runs the handler once and publishes its answer; a throwing handler is recorded as 500. */
export async function runAndPublish(
  record: ToolCallRecord,
  run: (toolCall: ToolCallContext) => Promise<Answer>,
  toolCall: ToolCallContext,
): Promise<void> {
  let answer: Answer;
  try {
    answer = await run(toolCall);
  } catch {
    answer = jsonAnswer(500, { message: HANDLER_FAILED_MESSAGE });
  }
  record.publish(answer);
}

/**
 * Resolves with the record's answer, or undefined when the client went away first. An
 * answer already published wins over a client that left.
 */
export async function waitForRecord(
  record: ToolCallRecord,
  request: AgentRequest,
  res: AgentResponse,
): Promise<Answer | undefined> {
  if (record.result) return record.result;
  let onClose!: () => void;
  const gone = new Promise<undefined>((resolve) => {
    onClose = () => resolve(undefined);
    if (res.destroyed || request.raw.destroyed) resolve(undefined);
    res.once("close", onClose);
  });
  try {
    const answer = await Promise.race([record.done, gone]);
    return answer ?? record.result;
  } finally {
    res.off("close", onClose);
  }
}

/** Wraps a side-effecting route's handler in the tool call middleware. */
export function withToolCalls(store: ToolCallStore, route: Route) {
  return async (request: AgentRequest, res: AgentResponse): Promise<void> => {
    const { enteredAt, chatId, body, query } = request;
    const parsed = parseToolCallHeaders(request.headers);
    if (parsed.kind === "error") {
      return sendAnswer(res, errorAnswer(400, "Invalid tool call headers.", parsed.detail));
    }
    if (parsed.kind === "tool_call" && chatId === undefined) {
      return sendAnswer(
        res,
        errorAnswer(400, "Tool call headers require the Coder-Chat-Id header."),
      );
    }
    const prepared = route({ body, query, chatId, enteredAt });
    if (prepared.kind === "answer") return sendAnswer(res, prepared.answer);
    if (parsed.kind === "none" || chatId === undefined) {
      return sendAnswer(res, await prepared.run(undefined));
    }
    const { messageId, toolCallId, ageMs } = parsed.headers;
    const key = { chatId, messageId, toolCallId };
    const decision = store.beginRun(
      key,
      inputHash(request.method, request.url, body),
      ageMs,
      enteredAt,
    );
    if (decision.kind === "refused") {
      return sendAnswer(res, jsonAnswer(409, toolCallErrorBody(decision.code)));
    }
    const { record } = decision;
    if (decision.kind === "run") {
      // The run belongs to the tool call, not to this request: it goes on if the client leaves.
      void runAndPublish(record, prepared.run, contextFor(key));
    }
    const answer = await waitForRecord(record, request, res);
    if (answer === undefined) return; // the client went away: nothing is written
    sendAnswer(res, answer, store.clock.now() - record.createdAt);
  };
}
