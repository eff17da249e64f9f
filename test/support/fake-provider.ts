// A fake OpenAI-compatible model server for tests: `POST /v1/chat/completions` on 127.0.0.1,
// streamed as OpenAI streams it (chat.completion.chunk lines, tool arguments in pieces, usage,
// [DONE]). It answers from a script of steps and, when the script is empty, with a short text.
// It also speaks OpenAI's Responses API (`POST /v1/responses`, streaming), whose tool calls
// complete one by one mid-stream (chat completions only complete them when the stream ends).

import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";

/** One tool call the fake model makes. */
export interface FakeToolCall {
  /** The call's ID on the wire (default `call_<random>`). */
  id?: string;
  name: string;
  /** The arguments; sent as JSON, or as-is when a string (to send malformed arguments). */
  args: unknown;
}

/** One model response. */
export interface FakeStep {
  /** Reasoning streamed first (`reasoning_content`, as DeepSeek, vLLM and others send it). */
  reasoning?: string;
  /** Text streamed before any tool call, a word a chunk. */
  text?: string;
  /** Tool calls, streamed one after the other, each call's arguments in several chunks. */
  toolCalls?: FakeToolCall[];
  /** Wait this long before every chunk (and before a non-streaming answer). */
  delayMs?: number;
  /** Send this many `data:` chunks, then nothing more until the client leaves or close(). */
  hangAfterChunks?: number;
  /** Token counts to report (default: estimated from the request and the answer). */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /**
   * Answer with this HTTP error instead of a completion (an OpenAI-style error body), with
   * these extra headers (`retry-after`, say).
   */
  error?: { status: number; message?: string; headers?: Record<string, string> };
}

const requestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(
    z.looseObject({
      role: z.string(),
      content: z.unknown().optional(),
      tool_call_id: z.string().optional(),
      tool_calls: z
        .array(
          z.looseObject({
            id: z.string(),
            type: z.literal("function"),
            function: z.object({ name: z.string(), arguments: z.string() }),
          }),
        )
        .optional(),
    }),
  ),
  tools: z
    .array(
      z.looseObject({
        type: z.literal("function"),
        function: z.looseObject({
          name: z.string(),
          description: z.string().optional(),
          parameters: z.unknown(),
        }),
      }),
    )
    .optional(),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).optional(),
});

/** A request body as received and parsed. */
export type FakeChatRequest = z.infer<typeof requestSchema>;

/** A scripted response, or a function deciding it from the request. */
export type FakeScriptEntry = FakeStep | ((request: FakeChatRequest) => FakeStep);

export interface FakeProvider {
  /** The base URL for the openai-compatible provider, ending in `/v1`. */
  url: string;
  /** Every chat request received, in order. */
  requests: FakeChatRequest[];
  /** The Authorization header of each of those requests (the API key the server sent). */
  authorizations: (string | undefined)[];
  /** The indexes in `requests` of those whose client left before the answer ended. */
  abandoned: number[];
  /** Queues responses, used one per request in order. */
  script(...steps: FakeScriptEntry[]): void;
  /** Answers every request the script leaves unanswered (default: {@link FAKE_DEFAULT_TEXT}). */
  respond(fallback: (request: FakeChatRequest) => FakeStep): void;
  /** Stops the server and drops every open connection, hanging ones included. */
  close(): Promise<void>;
}

/** The answer when the script is empty, so a test never hangs on a missing step. */
export const FAKE_DEFAULT_TEXT = "OK from the fake provider.";

type Chunk = Record<string, unknown>;

function randomId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString("hex")}`;
}

function argumentsOf(call: FakeToolCall): string {
  return typeof call.args === "string" ? call.args : JSON.stringify(call.args);
}

/** Splits a string into `count` pieces (fewer when it is shorter) that concatenate back to it. */
function pieces(text: string, count: number): string[] {
  const size = Math.max(1, Math.ceil(text.length / count));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function usageOf(step: FakeStep, request: FakeChatRequest) {
  const out =
    (step.reasoning ?? "") + (step.text ?? "") + (step.toolCalls ?? []).map(argumentsOf).join("");
  const u = step.usage ?? {
    prompt_tokens: Math.ceil(JSON.stringify(request.messages).length / 4),
    completion_tokens: Math.max(1, Math.ceil(out.length / 4)),
  };
  return { ...u, total_tokens: u.prompt_tokens + u.completion_tokens };
}

/** The stream's chunks without the envelope: a delta and finish reason each, or usage. */
function deltas(step: FakeStep, ids: string[]): { delta: Chunk; finish: string | null }[] {
  const out: { delta: Chunk; finish: string | null }[] = [
    { delta: { role: "assistant", content: "" }, finish: null },
  ];
  for (const word of step.reasoning?.match(/\s*\S+\s*/g) ?? []) {
    out.push({ delta: { reasoning_content: word }, finish: null });
  }
  for (const word of step.text?.match(/\s*\S+\s*/g) ?? []) {
    out.push({ delta: { content: word }, finish: null });
  }
  (step.toolCalls ?? []).forEach((call, index) => {
    const id = ids[index];
    out.push({
      delta: {
        tool_calls: [{ index, id, type: "function", function: { name: call.name, arguments: "" } }],
      },
      finish: null,
    });
    for (const piece of pieces(argumentsOf(call), 3)) {
      out.push({
        delta: { tool_calls: [{ index, function: { arguments: piece } }] },
        finish: null,
      });
    }
  });
  out.push({ delta: {}, finish: step.toolCalls?.length ? "tool_calls" : "stop" });
  return out;
}

async function streamAnswer(
  res: http.ServerResponse,
  step: FakeStep,
  request: FakeChatRequest,
  ids: string[],
): Promise<void> {
  const envelope = {
    id: randomId("chatcmpl-"),
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    system_fingerprint: "fp_fake",
  };
  const includeUsage = request.stream_options?.include_usage === true;
  const chunks: Chunk[] = deltas(step, ids).map(({ delta, finish }) => ({
    ...envelope,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(includeUsage && { usage: null }),
  }));
  if (includeUsage) chunks.push({ ...envelope, choices: [], usage: usageOf(step, request) });

  await writeEvents(res, step, chunks, "data: [DONE]\n\n");
}

async function jsonAnswer(
  res: http.ServerResponse,
  step: FakeStep,
  request: FakeChatRequest,
  ids: string[],
): Promise<void> {
  if (step.delayMs) await sleep(step.delayMs);
  if (step.hangAfterChunks !== undefined || res.destroyed) return;
  const toolCalls = (step.toolCalls ?? []).map((call, i) => ({
    id: ids[i],
    type: "function",
    function: { name: call.name, arguments: argumentsOf(call) },
  }));
  const message = {
    role: "assistant",
    content: step.text ?? null,
    ...(step.reasoning !== undefined && { reasoning_content: step.reasoning }),
    refusal: null,
    ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
  };
  sendJson(res, 200, {
    id: randomId("chatcmpl-"),
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [
      {
        index: 0,
        message,
        logprobs: null,
        finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
      },
    ],
    usage: usageOf(step, request),
    system_fingerprint: "fp_fake",
  });
}

// ---- the Responses API (`@ai-sdk/openai`'s default model) ------------------------------------

const responsesRequestSchema = z.looseObject({
  model: z.string(),
  input: z.array(z.looseObject({ type: z.string().optional(), role: z.string().optional() })),
  stream: z.boolean().optional(),
});

/** A Responses request seen as chat messages, so scripts and responders read one shape. */
function asChatRequest(r: z.infer<typeof responsesRequestSchema>): FakeChatRequest {
  const messages: FakeChatRequest["messages"] = r.input.map((item) => {
    if (item.type === "function_call_output")
      return { role: "tool", tool_call_id: String(item.call_id), content: item.output };
    if (item.type === "function_call")
      return {
        role: "assistant",
        tool_calls: [
          {
            id: String(item.call_id),
            type: "function" as const,
            function: { name: String(item.name), arguments: String(item.arguments) },
          },
        ],
      };
    const content = Array.isArray(item.content)
      ? (item.content as { text?: string }[]).map((c) => c.text ?? "").join("")
      : item.content;
    return { role: item.role ?? "user", content };
  });
  return { model: r.model, messages, stream: r.stream };
}

/** The Responses stream: a message item with the text, then one function_call item per call. */
async function streamResponses(
  res: http.ServerResponse,
  step: FakeStep,
  request: FakeChatRequest,
  ids: string[],
): Promise<void> {
  const events: Chunk[] = [
    {
      type: "response.created",
      response: {
        id: randomId("resp_"),
        created_at: Math.floor(Date.now() / 1000),
        model: request.model,
      },
    },
  ];
  let index = 0;
  if (step.text !== undefined) {
    const id = randomId("msg_");
    events.push({
      type: "response.output_item.added",
      output_index: index,
      item: { type: "message", id },
    });
    for (const word of step.text.match(/\s*\S+\s*/g) ?? [])
      events.push({ type: "response.output_text.delta", item_id: id, delta: word });
    events.push({
      type: "response.output_item.done",
      output_index: index,
      item: { type: "message", id },
    });
    index += 1;
  }
  (step.toolCalls ?? []).forEach((call, i) => {
    const item = { type: "function_call", id: randomId("fc_"), call_id: ids[i]!, name: call.name };
    const args = argumentsOf(call);
    events.push({
      type: "response.output_item.added",
      output_index: index,
      item: { ...item, arguments: "" },
    });
    for (const piece of pieces(args, 3))
      events.push({
        type: "response.function_call_arguments.delta",
        item_id: item.id,
        output_index: index,
        delta: piece,
      });
    events.push({
      type: "response.output_item.done",
      output_index: index,
      item: { ...item, arguments: args, status: "completed" },
    });
    index += 1;
  });
  const u = usageOf(step, request);
  events.push({
    type: "response.completed",
    response: {
      usage: {
        input_tokens: u.prompt_tokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: u.completion_tokens,
        output_tokens_details: { reasoning_tokens: 0 },
      },
    },
  });
  await writeEvents(res, step, events, "");
}

/** Writes `data:` events, honouring the step's delay and hang; `done` ends a complete stream. */
async function writeEvents(
  res: http.ServerResponse,
  step: FakeStep,
  events: Chunk[],
  done: string,
): Promise<void> {
  let gone = false;
  res.on("close", () => (gone = true));
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  let sent = 0;
  for (const event of events) {
    if (step.hangAfterChunks !== undefined && sent >= step.hangAfterChunks) return;
    if (step.delayMs) await sleep(step.delayMs);
    if (gone) return;
    res.write(`data: ${JSON.stringify(event)}\n\n`);
    sent += 1;
  }
  if (step.hangAfterChunks !== undefined && sent >= step.hangAfterChunks) return;
  res.end(done);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function sendError(res: http.ServerResponse, status: number, message: string): void {
  sendJson(res, status, {
    error: { message, type: "invalid_request_error", param: null, code: null },
  });
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Starts a fake provider on 127.0.0.1 with a free port. The test must close() it. */
export async function startFakeProvider(): Promise<FakeProvider> {
  const queue: FakeScriptEntry[] = [];
  const requests: FakeChatRequest[] = [];
  const authorizations: (string | undefined)[] = [];
  const abandoned: number[] = [];
  let fallback: (request: FakeChatRequest) => FakeStep = () => ({ text: FAKE_DEFAULT_TEXT });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const api =
      path === "/v1/chat/completions" ? "chat" : path === "/v1/responses" ? "responses" : undefined;
    if (req.method !== "POST" || api === undefined) {
      return sendError(res, 404, `Unknown route ${req.method ?? "?"} ${path}.`);
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return sendError(res, 400, "The request body is not JSON.");
    }
    let request: FakeChatRequest;
    if (api === "chat") {
      const parsed = requestSchema.safeParse(body);
      if (!parsed.success) return sendError(res, 400, z.prettifyError(parsed.error));
      request = parsed.data;
    } else {
      const parsed = responsesRequestSchema.safeParse(body);
      if (!parsed.success) return sendError(res, 400, z.prettifyError(parsed.error));
      request = asChatRequest(parsed.data);
    }
    const index = requests.push(request) - 1;
    authorizations.push(req.headers.authorization);
    res.once("close", () => {
      if (!res.writableEnded) abandoned.push(index);
    });
    const entry = queue.shift() ?? fallback;
    const step = typeof entry === "function" ? entry(request) : entry;
    const ids = (step.toolCalls ?? []).map((c) => c.id ?? randomId("call_"));
    if (step.error) {
      res.writeHead(step.error.status, {
        "content-type": "application/json",
        ...step.error.headers,
      });
      res.end(
        JSON.stringify({
          error: {
            message: step.error.message ?? `Fake error ${step.error.status}.`,
            type: step.error.status === 429 ? "rate_limit_exceeded" : "server_error",
            param: null,
            code: null,
          },
        }),
      );
      return;
    }
    if (api === "responses") {
      if (request.stream !== true) return sendError(res, 400, "Only streaming is supported.");
      await streamResponses(res, step, request, ids);
    } else if (request.stream === true) await streamAnswer(res, step, request, ids);
    else await jsonAnswer(res, step, request, ids);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, String(err));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    authorizations,
    abandoned,
    script: (...steps) => void queue.push(...steps),
    respond: (f) => {
      fallback = f;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
