// Benchmark: one model step, as chatd makes it (src/model/step.ts: the provider's doStream,
// the AI SDK's own prompt and tool conversions) against the same step through the AI SDK's
// `streamText` (the baseline: how a user of the SDK writes it, and how chatd made it before
// issue 15), and chatd's step through the runtime's fetch instead of its own (http-fetch.ts).
// The real openai-compatible provider, the same fake model server in a process of its own
// answering with one execute call, the same system prompt, messages and tools; the three
// taking turns in blocks. Prints this process's CPU per step (user + system, which the
// machine's load does not inflate) and the median and p99 wall time of each.
//
//   npm run bench:step -- --steps 1000 --warmup 100

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText, type ModelMessage } from "ai";
import { toolDeclarations } from "../src/chatd/tools/index.ts";
import { createLanguageModel, streamStep } from "../src/model/index.ts";
import { fmt, numberFlags, startFakeModel, stats } from "./support.ts";

const { steps, warmup } = numberFlags({ steps: 1000, warmup: 100 });
const BLOCK = 50;

const fake = await startFakeModel(1);
const model = await createLanguageModel({
  provider: "openai-compatible",
  model: "fake-model",
  baseUrl: fake.url,
});
/** The provider as the SDK's users make it: requests through the runtime's fetch. */
const sdkModel = createOpenAICompatible({
  name: "openai-compatible",
  baseURL: fake.url,
  includeUsage: true,
}).chatModel("fake-model");
// About the size of chatd's system prompt; the messages of a turn's first step.
const system = "You are a coding agent working in the user's workspace. ".repeat(30);
const messages: ModelMessage[] = [{ role: "user", content: "list the files" }];

async function viaStreamText(): Promise<number> {
  const result = streamText({
    model: sdkModel,
    system,
    messages,
    tools: toolDeclarations(),
    maxRetries: 0,
  });
  let calls = 0;
  for await (const p of result.fullStream) {
    if (p.type === "tool-call") calls++;
    if (p.type === "error") throw p.error;
  }
  return calls;
}

async function viaStreamStep(m: typeof model): Promise<number> {
  const signal = new AbortController().signal;
  let calls = 0;
  for await (const p of streamStep(m, {
    system,
    messages,
    tools: toolDeclarations(),
    abortSignal: signal,
  })) {
    if (p.type === "tool-call") calls++;
  }
  return calls;
}

const modes = [
  { name: "streamText (baseline)", run: viaStreamText, cpuMs: 0, wall: [] as number[] },
  {
    name: "chatd's step, fetch",
    run: () => viaStreamStep(sdkModel),
    cpuMs: 0,
    wall: [] as number[],
  },
  { name: "chatd's step", run: () => viaStreamStep(model), cpuMs: 0, wall: [] as number[] },
];
try {
  for (const m of modes) for (let i = 0; i < warmup; i++) await m.run();
  // In blocks of BLOCK steps a mode, the modes taking turns: a step's garbage is collected
  // later, by whichever step allocates next, so CPU is counted over a block, not a step.
  for (let done = 0; done < steps; done += BLOCK) {
    for (const m of modes) {
      const c0 = process.cpuUsage();
      for (let i = done; i < Math.min(steps, done + BLOCK); i++) {
        const t0 = performance.now();
        if ((await m.run()) !== 1) throw new Error(`${m.name}: the step made no tool call`);
        m.wall.push(performance.now() - t0);
      }
      const c = process.cpuUsage(c0);
      m.cpuMs += (c.user + c.system) / 1000;
    }
  }
  console.log(`one model step (one execute call), ${steps} per mode after ${warmup} warm-up`);
  console.log("mode                       cpu ms/step  median ms  p99 ms  cpu/baseline");
  const base = modes[0]!.cpuMs / steps;
  for (const m of modes) {
    const s = stats(m.wall);
    const cpu = m.cpuMs / steps;
    console.log(
      `${m.name.padEnd(26)}${fmt(cpu).padStart(12)}${fmt(s.median).padStart(11)}${fmt(s.p99).padStart(8)}${fmt(cpu / base, 2).padStart(13)}x`,
    );
  }
} finally {
  await fake.stop();
}
