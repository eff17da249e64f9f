import { APICallError, streamText, type ModelMessage } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toolDeclarations } from "../chatd/tools/index.ts";
import { startFakeProvider, type FakeProvider } from "../../test/support/fake-provider.ts";
import { createLanguageModel, streamStep, type StepPart } from "./index.ts";

let fake: FakeProvider;
beforeEach(async () => {
  fake = await startFakeProvider();
});
afterEach(async () => {
  await fake.close();
});

const model = () =>
  createLanguageModel({ provider: "openai-compatible", model: "fake-model", baseUrl: fake.url });

const HISTORY: ModelMessage[] = [
  { role: "user", content: "list the files" },
  {
    role: "assistant",
    content: [
      { type: "text", text: "Listing." },
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
        output: { type: "json", value: { status: "completed", output: "a\nb\n", exit_code: 0 } },
      },
    ],
  },
];

/** The parts of one step; `onPart` sees each as it arrives. */
async function parts(
  messages: ModelMessage[],
  o: { signal?: AbortSignal; onPart?: (p: StepPart) => void } = {},
): Promise<StepPart[]> {
  const out: StepPart[] = [];
  const s = streamStep(await model(), {
    system: "Be brief.",
    messages,
    tools: toolDeclarations(),
    abortSignal: o.signal ?? new AbortController().signal,
  });
  for await (const p of s) {
    out.push(p);
    o.onPart?.(p);
  }
  return out;
}

describe("streamStep", () => {
  it("sends the provider what streamText sends, and reads text, calls and usage", async () => {
    fake.script({ text: "two files" }, { text: "two files" });
    const result = streamText({
      model: await model(),
      system: "Be brief.",
      messages: HISTORY,
      tools: toolDeclarations(),
      maxRetries: 0,
    });
    await result.consumeStream();
    const got = await parts(HISTORY);
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1]).toEqual(fake.requests[0]);
    expect(fake.requests[1]!.tools!.map((t) => t.function.name)).toEqual(
      Object.keys(toolDeclarations()),
    );
    expect(got.filter((p) => p.type === "text-delta").map((p) => p.text)).toEqual(
      (await result.text).split(/(?<= )/),
    );
    const finish = got.at(-1)!;
    expect(finish.type).toBe("finish");
    expect(finish.type === "finish" && finish.usage.inputTokens).toBe(
      (await result.totalUsage).inputTokens,
    );
  });

  it("gives a call's arguments as JSON, {} for none, and malformed ones as sent", async () => {
    fake.script({
      toolCalls: [
        { id: "a", name: "execute", args: { command: "true", extra: 1 } },
        { id: "b", name: "process_list", args: "" },
        { id: "c", name: "execute", args: '{"command": "ls"' },
        { id: "d", name: "no_such_tool", args: { x: 1 } },
      ],
    });
    const calls = (await parts([{ role: "user", content: "go" }])).flatMap((p) =>
      p.type === "tool-call" ? [[p.toolCallId, p.toolName, p.input]] : [],
    );
    expect(calls).toEqual([
      ["a", "execute", { command: "true", extra: 1 }],
      ["b", "process_list", {}],
      ["c", "execute", '{"command": "ls"'],
      ["d", "no_such_tool", { x: 1 }],
    ]);
  });

  it("throws the provider's error with its status and headers", async () => {
    fake.script({ error: { status: 429, message: "slow down", headers: { "retry-after": "3" } } });
    const err = await parts([{ role: "user", content: "go" }]).catch((e: unknown) => e);
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(429);
    expect((err as APICallError).responseHeaders?.["retry-after"]).toBe("3");
  });

  it("throws the signal's reason when it aborts mid-stream", async () => {
    fake.script({ text: "a b c d e f", hangAfterChunks: 2 });
    const ac = new AbortController();
    const reason = new Error("stale task");
    const seen: StepPart[] = [];
    const err = await parts([{ role: "user", content: "go" }], {
      signal: ac.signal,
      onPart: (p) => {
        seen.push(p);
        ac.abort(reason);
      },
    }).catch((e: unknown) => e);
    expect(err).toBe(reason);
    expect(seen.length).toBeGreaterThan(0);
  });

  it("downloads nothing a message names: a URL is refused before any request", async () => {
    const err = await parts([
      {
        role: "user",
        content: [{ type: "image", image: new URL("http://169.254.169.254/latest/meta-data") }],
      },
    ]).catch((e: unknown) => e);
    expect((err as Error).message).toBe("chatd does not download assets named in a message");
    expect(fake.requests).toHaveLength(0);
  });
});
