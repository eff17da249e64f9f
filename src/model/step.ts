// One model step straight through the provider interface (LanguageModelV3's doStream), with the
// AI SDK's own prompt and tool conversions (`ai/internal`). chatd runs its own loop — its
// retries, its tool calls under the contract, one step per task — so streamText's machinery
// (multi-step control, tool execution, result promises, telemetry spans, a transform stream per
// stage) did nothing for it, yet cost ~1.1 ms of CPU per step, about as much as the provider's
// HTTP request and parsing (docs/benchmarks.md). What reaches the provider is the same
// request streamText would send.

import type { LanguageModelV3, LanguageModelV3FunctionTool } from "@ai-sdk/provider";
import type { LanguageModelUsage, ModelMessage, ToolSet } from "ai";
import {
  asLanguageModelUsage,
  convertToLanguageModelPrompt,
  prepareToolsAndToolChoice,
} from "ai/internal";

/** What chatd reads of a step's stream. */
export type StepPart =
  | { type: "text-delta"; text: string }
  | { type: "reasoning-delta"; text: string }
  /** `input`: the arguments as JSON when they parse, else the model's text as sent. */
  | { type: "tool-call"; toolCallId: string; toolName: string; input: unknown }
  | { type: "finish"; usage: LanguageModelUsage };

export interface StepRequest {
  system: string;
  messages: ModelMessage[];
  /** Declarations only: the calls come back as parts, nothing runs. None: a step without tools. */
  tools?: ToolSet;
  abortSignal: AbortSignal;
}

/** A tool set's provider form, made once per set (its JSON schemas are derived then). */
const declared = new WeakMap<ToolSet, Promise<LanguageModelV3FunctionTool[]>>();

function providerTools(tools: ToolSet): Promise<LanguageModelV3FunctionTool[]> {
  let p = declared.get(tools);
  if (!p) {
    p = prepareToolsAndToolChoice({ tools, toolChoice: undefined, activeTools: undefined }).then(
      (r) => (r.tools ?? []) as LanguageModelV3FunctionTool[],
    );
    declared.set(tools, p);
  }
  return p;
}

/** History never holds a URL, and the server fetches none on a message's behalf. */
function refuseDownload(requested: readonly unknown[]): Promise<never[]> {
  if (requested.length > 0) throw new Error("chatd does not download assets named in a message");
  return Promise.resolve([]);
}

/** A tool call's arguments as streamText gave them: `{}` for none, JSON, or the raw text. */
function toolInput(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Streams one step of `model`. Throws the provider's error as it threw it (an APICallError
 * with the response's status and headers, for the worker's retry), and the signal's reason
 * once it aborts.
 */
export async function* streamStep(
  model: LanguageModelV3,
  r: StepRequest,
): AsyncGenerator<StepPart, void, undefined> {
  try {
    const prompt = await convertToLanguageModelPrompt({
      prompt: { system: r.system, messages: r.messages },
      supportedUrls: await model.supportedUrls,
      download: refuseDownload,
      abortSignal: r.abortSignal,
    });
    const { stream } = await model.doStream({
      prompt,
      ...(r.tools && { tools: await providerTools(r.tools), toolChoice: { type: "auto" } }),
      abortSignal: r.abortSignal,
    });
    // Read by hand: Node's ReadableStream is async-iterable, but not every lib's type says so.
    const reader = stream.getReader();
    try {
      for (;;) {
        const { done, value: p } = await reader.read();
        if (done) break;
        switch (p.type) {
          case "text-delta":
            yield { type: "text-delta", text: p.delta };
            break;
          case "reasoning-delta":
            yield { type: "reasoning-delta", text: p.delta };
            break;
          case "tool-call":
            yield {
              type: "tool-call",
              toolCallId: p.toolCallId,
              toolName: p.toolName,
              input: toolInput(p.input),
            };
            break;
          case "finish":
            yield { type: "finish", usage: asLanguageModelUsage(p.usage) };
            break;
          case "error":
            throw p.error instanceof Error ? p.error : new Error(String(p.error));
          default:
            break;
        }
      }
    } finally {
      // A step left early (an error, a consumer that stopped) closes the provider's response.
      reader.cancel().catch(() => undefined);
    }
  } catch (err) {
    r.abortSignal.throwIfAborted();
    throw err;
  }
}
