// The `demo` model: an offline LanguageModelV3 that answers from the prompt alone (demo-reply.ts).
// It streams the same parts a real provider does (stream-start, text, tool input, tool-call,
// finish with usage), so everything downstream of the provider runs exactly as in production.

import { randomBytes } from "node:crypto";
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
  LanguageModelV3StreamResult,
  LanguageModelV3Usage,
} from "@ai-sdk/provider";
import { type DemoReply, decideDemoReply, estimateTokens, promptText } from "./demo-reply.ts";

export const DEMO_PROVIDER = "tether.demo";
export const DEMO_MODEL_ID = "demo";

/** Words per text delta, so text arrives in several pieces like a real stream. */
const WORDS_PER_TEXT_DELTA = 3;
/** Pieces the tool input JSON is streamed in. */
const TOOL_INPUT_PIECES = 3;
const TEXT_ID = "txt-0";

export interface DemoModelOptions {
  /** Makes tool call IDs (default `demo_call_<n>_<random hex>`); tests inject a fixed one. */
  generateToolCallId?: () => string;
}

let toolCallCounter = 0;

function defaultToolCallId(): string {
  toolCallCounter += 1;
  return `demo_call_${toolCallCounter}_${randomBytes(4).toString("hex")}`;
}

/** A decided reply with its tool call ID and JSON input fixed, shared by both call styles. */
interface PlannedReply {
  text: string;
  toolCall?: { toolCallId: string; toolName: string; input: string };
  finishReason: LanguageModelV3FinishReason;
  usage: LanguageModelV3Usage;
}

function plan(
  options: LanguageModelV3CallOptions,
  reply: DemoReply,
  newId: () => string,
): PlannedReply {
  const input = reply.kind === "tool-call" ? JSON.stringify(reply.input) : "";
  const inputTokens = estimateTokens(promptText(options.prompt));
  const outputTokens = estimateTokens(reply.text + input);
  const usage: LanguageModelV3Usage = {
    inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: outputTokens, text: outputTokens, reasoning: 0 },
  };
  switch (reply.kind) {
    case "text":
      return { text: reply.text, finishReason: { unified: "stop", raw: "stop" }, usage };
    case "tool-call":
      return {
        text: reply.text,
        toolCall: { toolCallId: newId(), toolName: reply.toolName, input },
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
      };
    default: {
      const unreachable: never = reply;
      throw new Error(`Unknown demo reply ${JSON.stringify(unreachable)}`);
    }
  }
}

/** Splits text into deltas of a few words each; concatenated, they give the text back. */
function textDeltas(text: string): string[] {
  const words = text.match(/\s*\S+\s*/g) ?? [text];
  const deltas: string[] = [];
  for (let i = 0; i < words.length; i += WORDS_PER_TEXT_DELTA) {
    deltas.push(words.slice(i, i + WORDS_PER_TEXT_DELTA).join(""));
  }
  return deltas;
}

/** Splits a JSON string into pieces that concatenate back to it. */
function inputPieces(input: string): string[] {
  const size = Math.max(1, Math.ceil(input.length / TOOL_INPUT_PIECES));
  const pieces: string[] = [];
  for (let i = 0; i < input.length; i += size) pieces.push(input.slice(i, i + size));
  return pieces;
}

function streamParts(planned: PlannedReply, responseId: string): LanguageModelV3StreamPart[] {
  const parts: LanguageModelV3StreamPart[] = [
    { type: "stream-start", warnings: [] },
    { type: "response-metadata", id: responseId, modelId: DEMO_MODEL_ID },
  ];
  if (planned.text !== "") {
    parts.push({ type: "text-start", id: TEXT_ID });
    for (const delta of textDeltas(planned.text)) {
      parts.push({ type: "text-delta", id: TEXT_ID, delta });
    }
    parts.push({ type: "text-end", id: TEXT_ID });
  }
  const call = planned.toolCall;
  if (call) {
    parts.push({ type: "tool-input-start", id: call.toolCallId, toolName: call.toolName });
    for (const delta of inputPieces(call.input)) {
      parts.push({ type: "tool-input-delta", id: call.toolCallId, delta });
    }
    parts.push({ type: "tool-input-end", id: call.toolCallId });
    parts.push({ type: "tool-call", ...call });
  }
  parts.push({ type: "finish", finishReason: planned.finishReason, usage: planned.usage });
  return parts;
}

/** A stream that hands out one part per read and fails as soon as the signal aborts. */
function readableOf(
  parts: LanguageModelV3StreamPart[],
  signal: AbortSignal | undefined,
): ReadableStream<LanguageModelV3StreamPart> {
  let next = 0;
  return new ReadableStream<LanguageModelV3StreamPart>({
    pull(controller) {
      if (signal?.aborted) {
        controller.error(signal.reason);
        return;
      }
      const part = parts[next];
      next += 1;
      if (part === undefined) controller.close();
      else controller.enqueue(part);
    },
  });
}

/** Creates the offline demo model. */
export function createDemoModel(options: DemoModelOptions = {}): LanguageModelV3 {
  const newId = options.generateToolCallId ?? defaultToolCallId;
  const newResponseId = () => `demo_resp_${randomBytes(6).toString("hex")}`;
  return {
    specificationVersion: "v3",
    provider: DEMO_PROVIDER,
    modelId: DEMO_MODEL_ID,
    supportedUrls: {},

    async doGenerate(call: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
      call.abortSignal?.throwIfAborted();
      const planned = plan(call, decideDemoReply(call), newId);
      const content: LanguageModelV3Content[] = [];
      if (planned.text !== "") content.push({ type: "text", text: planned.text });
      if (planned.toolCall) content.push({ type: "tool-call", ...planned.toolCall });
      return {
        content,
        finishReason: planned.finishReason,
        usage: planned.usage,
        response: { id: newResponseId(), modelId: DEMO_MODEL_ID },
        warnings: [],
      };
    },

    async doStream(call: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
      call.abortSignal?.throwIfAborted();
      const planned = plan(call, decideDemoReply(call), newId);
      return { stream: readableOf(streamParts(planned, newResponseId()), call.abortSignal) };
    },
  };
}
