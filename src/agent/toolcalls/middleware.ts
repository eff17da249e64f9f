// The tool call middleware (CONTRACT.md 6): wraps the start, edit and write routes so each
// tool call's handler runs at most once in the agent's lifetime, and every repeat of the
// request gets the one recorded answer back — byte for byte, with the run age.

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import {
  RUN_AGE_HEADER,
  parseToolCallHeaders,
  toolCallErrorBody,
  type ChatId,
  type DistinctHeaders,
} from "../../contract/index.ts";
import { errorAnswer, jsonAnswer, type Answer } from "../answer.ts";
import {
  contextFor,
  type ToolCallContext,
  type ToolCallRecord,
  type ToolCallStore,
} from "./store.ts";

/** What a wrapped route sees: the request's exact body bytes, before anything is decided. */
export interface RequestInput {
  body: Buffer;
  query: Record<string, string | undefined>;
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

/** Per-request state the agent's hooks fill in before any handler runs. */
export interface AgentRequestState {
  enteredAt: number;
  chatId: ChatId | undefined;
}

/**
 * Header values by lower-case name with repeats kept apart. Node joins repeats in
 * `headers`; `headersDistinct` keeps them, and is rebuilt from `rawHeaders` where a request
 * object lacks it (Fastify's inject).
 */
export function distinctHeaders(raw: IncomingMessage): DistinctHeaders {
  if (raw.headersDistinct) return raw.headersDistinct;
  const out: Record<string, string[]> = {};
  for (let i = 0; i < raw.rawHeaders.length; i += 2) {
    (out[raw.rawHeaders[i]!.toLowerCase()] ??= []).push(raw.rawHeaders[i + 1]!);
  }
  return out;
}

export function requestState(request: FastifyRequest): AgentRequestState {
  return (request as unknown as { agent: AgentRequestState }).agent;
}

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
  reply: FastifyReply,
): Promise<Answer | undefined> {
  if (record.result) return record.result;
  const res = reply.raw;
  let onClose!: () => void;
  const gone = new Promise<undefined>((resolve) => {
    onClose = () => resolve(undefined);
    if (res.destroyed || reply.request.raw.destroyed) resolve(undefined);
    res.once("close", onClose);
  });
  try {
    const answer = await Promise.race([record.done, gone]);
    return answer ?? record.result;
  } finally {
    res.off("close", onClose);
  }
}

export function sendAnswer(reply: FastifyReply, answer: Answer, runAgeMs?: number): FastifyReply {
  reply.code(answer.status);
  if (answer.contentType !== "") reply.header("content-type", answer.contentType);
  if (runAgeMs !== undefined)
    reply.header(RUN_AGE_HEADER, String(Math.max(0, Math.floor(runAgeMs))));
  return reply.send(answer.body);
}

/** Wraps a side-effecting route's handler in the tool call middleware. */
export function withToolCalls(store: ToolCallStore, route: Route) {
  return async (
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply | undefined> => {
    const { enteredAt, chatId } = requestState(request);
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const query = request.query as Record<string, string | undefined>;
    const parsed = parseToolCallHeaders(distinctHeaders(request.raw));
    if (parsed.kind === "error") {
      return sendAnswer(reply, errorAnswer(400, "Invalid tool call headers.", parsed.detail));
    }
    if (parsed.kind === "tool_call" && chatId === undefined) {
      return sendAnswer(
        reply,
        errorAnswer(400, "Tool call headers require the Coder-Chat-Id header."),
      );
    }
    const prepared = route({ body, query, chatId, enteredAt });
    if (prepared.kind === "answer") return sendAnswer(reply, prepared.answer);
    if (parsed.kind === "none" || chatId === undefined) {
      return sendAnswer(reply, await prepared.run(undefined));
    }
    const { messageId, toolCallId, ageMs } = parsed.headers;
    const key = { chatId, messageId, toolCallId };
    const decision = store.beginRun(
      key,
      inputHash(request.method, request.raw.url ?? "", body),
      ageMs,
      enteredAt,
    );
    if (decision.kind === "refused") {
      return sendAnswer(reply, jsonAnswer(409, toolCallErrorBody(decision.code)));
    }
    const { record } = decision;
    if (decision.kind === "run") {
      // The run belongs to the tool call, not to this request: it goes on if the client leaves.
      void runAndPublish(record, prepared.run, contextFor(key));
    }
    const answer = await waitForRecord(record, reply);
    if (answer === undefined) {
      reply.hijack();
      return undefined;
    }
    return sendAnswer(reply, answer, store.clock.now() - record.createdAt);
  };
}
