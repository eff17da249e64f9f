// Benchmark 1: start-and-wait of a trivial command (`true`) through the agent, with tool call
// headers and without, against raw in-process spawn and a bare node:http floor server, all in
// one run with the modes interleaved. Prints median and p99 latency (ms) and the ratios. The
// raw spawn and the floor do the process work the contract asks of the agent (output piped and
// read to end of file before the exit counts), so the ratios measure only what the agent adds.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { AgentClient, parseChatId, toMessageId } from "../src/contract/index.ts";
import { fmt, numberFlags, startAgent, startScript, stats } from "./support.ts";

const { iterations, warmup } = numberFlags({ iterations: 400, warmup: 40 });
const COMMAND = "true";

/** The floor's process work (floor-server.mjs) without HTTP: spawn, read the output, wait. */
function rawSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", COMMAND], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    child.once("error", reject);
    let pending = 3; // the exit and end of file on both pipes
    const done = () => {
      if (--pending === 0) resolve();
    };
    for (const stream of [child.stdout, child.stderr]) {
      stream.on("data", () => {});
      stream.once("end", done);
    }
    child.once("exit", done);
  });
}

const dir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-"));
const floor = await startScript("bench/floor-server.mjs");
const agent = await startAgent(dir);
const floorClient = new AgentClient({ baseUrl: floor.url });
const agentClient = new AgentClient({ baseUrl: agent.url });
// Age 0 runs only once the agent has been up longer than the 2 s age margin.
await new Promise((r) => setTimeout(r, 2_100));

const chatId = parseChatId(randomUUID())!;
let message = 0;

async function startAndWait(client: AgentClient, headers: boolean): Promise<void> {
  const toolCall = headers
    ? { chatId, messageId: toMessageId(++message)!, toolCallId: "call_0", ageMs: 0 }
    : undefined;
  const started = await client.startProcess({ command: COMMAND }, toolCall ? { toolCall } : {});
  const out = await client.processOutput(started.id, { wait: true, ...(toolCall && { chatId }) });
  if (out.running || out.exit_code !== 0)
    throw new Error(`unexpected output ${JSON.stringify(out)}`);
}

const modes: [string, () => Promise<void>][] = [
  ["raw spawn (in-process)", rawSpawn],
  ["floor: bare node:http", () => startAndWait(floorClient, false)],
  ["agent, no headers", () => startAndWait(agentClient, false)],
  ["agent, tool call headers", () => startAndWait(agentClient, true)],
];
const samples = new Map<string, number[]>(modes.map(([name]) => [name, []]));
// The order they run in. A mode that follows one on the same server finds it warm (its
// caches, its spawner just awake): the agent with tool call headers, the target, follows the
// floor, so it finds the agent as idle as the floor finds itself, as a real tool call finds
// the agent after a model call. (The agent without headers, after it, is the one favored.)
const runOrder = [0, 1, 3, 2].map((i) => modes[i]!);

try {
  for (let i = 0; i < warmup + iterations; i++) {
    for (const [name, run] of runOrder) {
      const t0 = performance.now();
      await run();
      if (i >= warmup) samples.get(name)!.push(performance.now() - t0);
    }
  }
  const result = new Map([...samples].map(([k, v]) => [k, stats(v)]));
  const raw = result.get("raw spawn (in-process)")!;
  const fl = result.get("floor: bare node:http")!;
  console.log(
    `start-and-wait of \`${COMMAND}\`, ${iterations} iterations per mode (after ${warmup} warm-up), modes interleaved`,
  );
  console.log(
    "mode                          median ms   p99 ms   median/raw  median/floor  p99/floor",
  );
  for (const [name, s] of result) {
    console.log(
      `${name.padEnd(30)}${fmt(s.median).padStart(9)}${fmt(s.p99).padStart(9)}${fmt(s.median / raw.median, 2).padStart(13)}${fmt(s.median / fl.median, 2).padStart(14)}${fmt(s.p99 / fl.p99, 2).padStart(11)}`,
    );
  }
  const withHeaders = result.get("agent, tool call headers")!;
  console.log(
    `target: agent with headers within 1.15x of the floor (median): ${fmt(withHeaders.median / fl.median, 2)}x ${withHeaders.median / fl.median <= 1.15 ? "MET" : "NOT MET"}`,
  );
} finally {
  floorClient.close();
  agentClient.close();
  await Promise.all([floor.stop(), agent.stop()]);
  await rm(dir, { recursive: true, force: true });
}
