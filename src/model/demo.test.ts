import type { JSONValue } from "@ai-sdk/provider";
import { generateText, type ModelMessage, streamText, tool, type ToolSet } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createDemoModel } from "./demo.ts";
import { DEMO_HELP_TEXT } from "./demo-reply.ts";

// Declared without execute, as chatd declares them: the SDK returns the calls instead of running them.
const TOOLS = {
  execute: tool({
    description: "Run a shell command.",
    inputSchema: z.object({
      command: z.string(),
      timeout: z.string().optional(),
      run_in_background: z.boolean().optional(),
    }),
  }),
  read_file: tool({
    description: "Read a file.",
    inputSchema: z.object({ path: z.string() }),
  }),
  write_file: tool({
    description: "Write a file.",
    inputSchema: z.object({ path: z.string(), content: z.string() }),
  }),
} satisfies ToolSet;

async function run(messages: ModelMessage[], tools: ToolSet = TOOLS) {
  const result = streamText({ model: createDemoModel(), messages, tools });
  const partTypes: string[] = [];
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
    partTypes.push(part.type);
  }
  const toolCalls = await result.toolCalls;
  return {
    text: await result.text,
    toolCalls,
    /** [tool name, parsed input] of each call. */
    calls: toolCalls.map((c): [string, unknown] => [c.toolName, c.input]),
    finishReason: await result.finishReason,
    usage: await result.usage,
    partTypes,
  };
}

function user(text: string): ModelMessage[] {
  return [{ role: "user", content: text }];
}

/** A history ending in the result of one tool call, as chatd sends it. */
function afterResult(toolName: string, value: JSONValue): ModelMessage[] {
  return [
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: [{ type: "tool-call", toolCallId: "call_1", toolName, input: {} }],
    },
    {
      role: "tool",
      content: [
        {
          type: "tool-result",
          toolCallId: "call_1",
          toolName,
          output: { type: "json", value },
        },
      ],
    },
  ];
}

describe("demo model", () => {
  it("dollar space calls execute with the command", async () => {
    const r = await run(user("$ ls -la /tmp"));
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]).toMatchObject({
      toolName: "execute",
      input: { command: "ls -la /tmp" },
    });
    expect(r.toolCalls[0]?.input).not.toHaveProperty("run_in_background");
    expect(r.finishReason).toBe("tool-calls");
  });

  it("dollar ampersand calls execute in the background", async () => {
    const r = await run(user("$& sleep 30 && echo done"));
    expect(r.calls).toEqual([
      ["execute", { command: "sleep 30 && echo done", run_in_background: true }],
    ]);
  });

  it("read PATH calls read_file with the path", async () => {
    const r = await run(user("read src/main.ts"));
    expect(r.calls).toEqual([["read_file", { path: "src/main.ts" }]]);
  });

  it("write PATH and content lines call write_file with exactly that content", async () => {
    const r = await run(user("write notes/a.txt\nfirst line\nsecond line\n"));
    expect(r.calls).toEqual([
      ["write_file", { path: "notes/a.txt", content: "first line\nsecond line\n" }],
    ]);
  });

  it("streams like a provider: stream start, text, tool input in pieces, call, finish with usage", async () => {
    const r = await run(user("$ echo hi"));
    expect(r.partTypes[0]).toBe("start");
    expect(r.partTypes).toContain("text-delta");
    expect(r.partTypes.filter((t) => t === "tool-input-delta").length).toBeGreaterThan(1);
    expect(r.partTypes.indexOf("tool-input-start")).toBeLessThan(r.partTypes.indexOf("tool-call"));
    expect(r.partTypes.at(-1)).toBe("finish");
    expect(r.usage.inputTokens).toBeGreaterThan(0);
    expect(r.usage.outputTokens).toBeGreaterThan(0);
  });

  it("tool call IDs are unique across calls and models", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const r = await run(user(`$ echo ${i}`));
      for (const c of r.toolCalls) ids.add(c.toolCallId);
    }
    expect(ids.size).toBe(5);
    for (const id of ids) expect(id).toMatch(/^demo_call_\d+_[0-9a-f]+$/);
  });

  it("an execute result gets a one-line summary with exit code, size and short first line", async () => {
    const r = await run(
      afterResult("execute", { status: "completed", exit_code: 2, output: "no such file\nmore\n" }),
    );
    expect(r.toolCalls).toEqual([]);
    expect(r.text).toBe("Exit code 2, 18 bytes of output. First line: no such file");
    expect(r.finishReason).toBe("stop");
  });

  it("a long first line of output is not quoted", async () => {
    const r = await run(
      afterResult("execute", { status: "completed", exit_code: 0, output: "x".repeat(500) }),
    );
    expect(r.text).toBe("Exit code 0, 500 bytes of output.");
  });

  it("another result gets a one-line summary of its status", async () => {
    const r = await run(
      afterResult("write_file", { status: "unknown", reason: "agent unreachable; check the file" }),
    );
    expect(r.text).toBe(
      'write_file ended with status "unknown". agent unreachable; check the file',
    );
    expect(r.text).not.toContain("\n");
  });

  it("any other text gets the help answer naming the forms and how to configure a provider", async () => {
    const r = await run(user("hello, what can you do?"));
    expect(r.toolCalls).toEqual([]);
    expect(r.text).toBe(DEMO_HELP_TEXT);
    for (const needle of [
      "$ COMMAND",
      "$& COMMAND",
      "read PATH",
      "write PATH",
      "--model anthropic:",
      "ANTHROPIC_API_KEY",
      "OPENAI_API_KEY",
      "GOOGLE_GENERATIVE_AI_API_KEY",
      "openai-compatible:<model> --model-base-url URL",
    ]) {
      expect(r.text).toContain(needle);
    }
  });

  it("an undeclared tool is never called: the answer is text instead", async () => {
    const { read_file, write_file } = TOOLS;
    const r = await run(user("$ rm -rf build"), { read_file, write_file });
    expect(r.toolCalls).toEqual([]);
    expect(r.text).toContain("execute tool is not available");
    expect(r.finishReason).toBe("stop");
  });

  it("doGenerate gives the same decision as the stream", async () => {
    const r = await generateText({
      model: createDemoModel(),
      messages: user("read a.txt"),
      tools: TOOLS,
    });
    expect(r.toolCalls.map((c) => [c.toolName, c.input])).toEqual([
      ["read_file", { path: "a.txt" }],
    ]);
    expect(r.usage.inputTokens).toBeGreaterThan(0);
  });
});
