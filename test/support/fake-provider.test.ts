import { createParser } from "eventsource-parser";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, type ModelMessage, streamText, tool } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createLanguageModel } from "../../src/model/index.ts";
import { FAKE_DEFAULT_TEXT, type FakeProvider, startFakeProvider } from "./fake-provider.ts";

const TOOLS = {
  execute: tool({
    description: "Run a shell command.",
    inputSchema: z.object({ command: z.string(), timeout: z.string().optional() }),
  }),
  read_file: tool({ description: "Read a file.", inputSchema: z.object({ path: z.string() }) }),
};

let fake: FakeProvider;
beforeEach(async () => {
  fake = await startFakeProvider();
});
afterEach(async () => {
  await fake.close();
});

function model(includeUsage = false) {
  return createOpenAICompatible({ baseURL: fake.url, name: "fake", includeUsage }).chatModel(
    "fake-model",
  );
}

async function stream(messages: ModelMessage[], opts: { includeUsage?: boolean } = {}) {
  const result = streamText({ model: model(opts.includeUsage), messages, tools: TOOLS });
  const types: string[] = [];
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
    types.push(part.type);
  }
  return {
    text: await result.text,
    toolCalls: await result.toolCalls,
    finishReason: await result.finishReason,
    usage: await result.usage,
    types,
  };
}

/** The raw `data:` payloads of one streamed answer. */
async function rawStream(body: Record<string, unknown>): Promise<string[]> {
  const res = await fetch(`${fake.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], ...body }),
  });
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const text = await res.text();
  expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
  const data: string[] = [];
  const parser = createParser({ onEvent: (m) => data.push(m.data) });
  parser.feed(text);
  return data;
}

describe("fake OpenAI-compatible provider", () => {
  it("streamed text arrives as text through the real provider", async () => {
    fake.script({ text: "Hello from the scripted model." });
    const r = await stream([{ role: "user", content: "hi" }]);
    expect(r.text).toBe("Hello from the scripted model.");
    expect(r.types.filter((t) => t === "text-delta").length).toBeGreaterThan(1);
    expect(r.finishReason).toBe("stop");
  });

  it("a tool call split across chunks arrives with parsed input", async () => {
    fake.script({ toolCalls: [{ id: "call_a", name: "execute", args: { command: "ls -la" } }] });
    const r = await stream([{ role: "user", content: "list" }]);
    expect(r.toolCalls).toMatchObject([
      { toolCallId: "call_a", toolName: "execute", input: { command: "ls -la" } },
    ]);
    expect(r.types.filter((t) => t === "tool-input-delta").length).toBeGreaterThan(1);
    expect(r.finishReason).toBe("tool-calls");
  });

  it("two parallel tool calls both arrive, in order, after the text", async () => {
    fake.script({
      text: "Two things.",
      toolCalls: [
        { name: "execute", args: { command: "pwd" } },
        { name: "read_file", args: { path: "README.md" } },
      ],
    });
    const r = await stream([{ role: "user", content: "go" }]);
    expect(r.text).toBe("Two things.");
    expect(r.toolCalls.map((c) => [c.toolName, c.input])).toEqual([
      ["execute", { command: "pwd" }],
      ["read_file", { path: "README.md" }],
    ]);
    expect(r.toolCalls[0]?.toolCallId).not.toBe(r.toolCalls[1]?.toolCallId);
  });

  it("usage is reported when the request asks for it", async () => {
    fake.script({ text: "ok", usage: { prompt_tokens: 42, completion_tokens: 7 } });
    const r = await stream([{ role: "user", content: "hi" }], { includeUsage: true });
    expect(fake.requests[0]?.stream_options).toEqual({ include_usage: true });
    expect(r.usage).toMatchObject({ inputTokens: 42, outputTokens: 7, totalTokens: 49 });
  });

  it("the registry's openai-compatible model asks for usage and gets it", async () => {
    fake.script({ text: "ok", usage: { prompt_tokens: 5, completion_tokens: 1 } });
    const registryModel = await createLanguageModel(
      { provider: "openai-compatible", model: "local", baseUrl: fake.url },
      {},
    );
    const result = streamText({ model: registryModel, prompt: "hi" });
    expect(await result.text).toBe("ok");
    expect(await result.usage).toMatchObject({ inputTokens: 5, outputTokens: 1 });
    expect(fake.requests[0]).toMatchObject({ model: "local", stream: true });
  });

  it("the wire is OpenAI's: chunk envelopes, arguments in pieces, a usage chunk, then DONE", async () => {
    fake.script({ toolCalls: [{ id: "call_w", name: "execute", args: { command: "echo hi" } }] });
    const payloads = await rawStream({ stream: true, stream_options: { include_usage: true } });
    expect(payloads.at(-1)).toBe("[DONE]");
    const chunks = payloads.slice(0, -1).map((p) => JSON.parse(p) as Record<string, unknown>);
    for (const c of chunks) {
      expect(c).toMatchObject({ object: "chat.completion.chunk", model: "m" });
      expect(c.id).toBe(chunks[0]?.id);
    }
    const usageChunk = chunks.at(-1);
    expect(usageChunk).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
    const finish = chunks.at(-2) as { choices: { finish_reason: string }[] };
    expect(finish.choices[0]?.finish_reason).toBe("tool_calls");
    const args = chunks.flatMap((c) =>
      (c.choices as { delta: { tool_calls?: { function: { arguments?: string } }[] } }[]).flatMap(
        (ch) => ch.delta.tool_calls?.map((t) => t.function.arguments ?? "") ?? [],
      ),
    );
    expect(args.filter((a) => a !== "").length).toBeGreaterThan(1);
    expect(args.join("")).toBe('{"command":"echo hi"}');
  });

  it("without include_usage no usage chunk is sent", async () => {
    const payloads = await rawStream({ stream: true });
    const chunks = payloads.slice(0, -1).map((p) => JSON.parse(p) as Record<string, unknown>);
    expect(chunks.some((c) => "usage" in c)).toBe(false);
  });

  it("the server records the request's messages and tools", async () => {
    fake.script({ text: "done" });
    await stream([
      { role: "user", content: "list" },
      {
        role: "assistant",
        content: [
          { type: "tool-call", toolCallId: "c1", toolName: "execute", input: { command: "ls" } },
        ],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c1",
            toolName: "execute",
            output: { type: "json", value: { status: "completed", exit_code: 0, output: "a\n" } },
          },
        ],
      },
    ]);
    const req = fake.requests[0];
    expect(req?.model).toBe("fake-model");
    expect(req?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(req?.messages[1]?.tool_calls?.[0]).toMatchObject({
      id: "c1",
      function: { name: "execute", arguments: '{"command":"ls"}' },
    });
    expect(req?.messages[2]).toMatchObject({ tool_call_id: "c1" });
    expect(req?.tools?.map((t) => t.function.name)).toEqual(["execute", "read_file"]);
    expect(req?.tools?.[0]?.function.parameters).toMatchObject({
      type: "object",
      required: ["command"],
    });
  });

  it("a function step decides from the request", async () => {
    fake.script((req) => ({ text: `You said ${JSON.stringify(req.messages.at(-1)?.content)}` }));
    const r = await stream([{ role: "user", content: "ping" }]);
    expect(r.text).toBe('You said "ping"');
  });

  it("an empty script answers a short text instead of hanging", async () => {
    const r = await stream([{ role: "user", content: "anything" }]);
    expect(r.text).toBe(FAKE_DEFAULT_TEXT);
  });

  it("a responder answers what the script leaves, from each request", async () => {
    fake.script({ text: "scripted" });
    fake.respond((req) => ({ text: `seen ${req.messages.length}` }));
    expect((await stream([{ role: "user", content: "a" }])).text).toBe("scripted");
    expect((await stream([{ role: "user", content: "b" }])).text).toBe("seen 1");
  });

  it("a non-streaming request gets a chat.completion with tool calls and usage", async () => {
    fake.script({ text: "Reading.", toolCalls: [{ name: "read_file", args: { path: "a.txt" } }] });
    const r = await generateText({ model: model(), prompt: "read a.txt", tools: TOOLS });
    expect(fake.requests[0]?.stream).not.toBe(true);
    expect(r.text).toBe("Reading.");
    expect(r.toolCalls.map((c) => [c.toolName, c.input])).toEqual([
      ["read_file", { path: "a.txt" }],
    ]);
    expect(r.usage.outputTokens).toBeGreaterThan(0);
  });

  it("delayMs waits before every chunk", async () => {
    fake.script({ text: "a b", delayMs: 40 });
    const started = performance.now();
    const r = await stream([{ role: "user", content: "hi" }]);
    // Four chunks (role, "a ", "b", finish), each after 40 ms.
    expect(r.text).toBe("a b");
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
  });

  it("a hanging step sends only its first chunks and ends when the client aborts", async () => {
    fake.script({ text: "one two three four five", hangAfterChunks: 3 });
    const result = streamText({
      model: model(),
      prompt: "hi",
      abortSignal: AbortSignal.timeout(300),
    });
    let text = "";
    const types: string[] = [];
    for await (const part of result.fullStream) {
      types.push(part.type);
      if (part.type === "text-delta") text += part.text;
    }
    // Three chunks: the role chunk, "one ", "two "; then nothing until the abort.
    expect(text).toBe("one two ");
    expect(types).toContain("abort");
    expect(types).not.toContain("finish");
  });
});

describe("the Responses API, through the real openai provider", () => {
  const responsesModel = () =>
    createLanguageModel({
      provider: "openai",
      model: "fake-model",
      baseUrl: fake.url,
      apiKey: "k",
    });

  it("streams text, tool calls and usage, and reads tool results back as messages", async () => {
    fake.script({
      text: "Looking now.",
      toolCalls: [{ id: "c1", name: "read_file", args: { path: "/a" } }],
    });
    fake.respond((req) => ({
      text: `results: ${req.messages.filter((m) => m.role === "tool").length}`,
    }));
    const first = streamText({ model: await responsesModel(), prompt: "read /a", tools: TOOLS });
    expect(await first.text).toBe("Looking now.");
    const calls = await first.toolCalls;
    expect(calls.map((c) => [c.toolCallId, c.toolName, c.input])).toEqual([
      ["c1", "read_file", { path: "/a" }],
    ]);
    expect((await first.usage).outputTokens).toBeGreaterThan(0);
    const second = streamText({
      model: await responsesModel(),
      messages: [
        { role: "user", content: "read /a" },
        {
          role: "assistant",
          content: [
            { type: "tool-call", toolCallId: "c1", toolName: "read_file", input: { path: "/a" } },
          ],
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "c1",
              toolName: "read_file",
              output: { type: "text", value: "A" },
            },
          ],
        },
      ],
      tools: TOOLS,
    });
    expect(await second.text).toBe("results: 1");
    expect(fake.requests[1]!.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
  });

  it("a tool call completes mid-stream, before the stream ends", async () => {
    // created, the message (added, 2 deltas, done), the call (added, 3 deltas, done): then hang.
    fake.script({
      text: "Running it.",
      toolCalls: [{ id: "c1", name: "execute", args: { command: "ls" } }],
      hangAfterChunks: 10,
    });
    const abort = new AbortController();
    const result = streamText({
      model: await responsesModel(),
      prompt: "go",
      tools: TOOLS,
      abortSignal: abort.signal,
    });
    const seen: string[] = [];
    for await (const part of result.fullStream) {
      seen.push(part.type);
      if (part.type === "tool-call") {
        expect(part.input).toEqual({ command: "ls" });
        abort.abort();
      }
    }
    expect(seen).toContain("tool-call");
    expect(seen).not.toContain("finish-step");
  });
});
