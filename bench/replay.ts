// Benchmark 2: replay. Repeated identical starts of a finished tool call (the agent answers
// from its record, nothing runs), in requests per second, against a bare Fastify route that
// answers a constant. Rounds alternate between the two so drift hits both alike.

import http from "node:http";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import {
  AgentClient,
  parseChatId,
  toMessageId,
  toolCallRequestHeaders,
} from "../src/contract/index.ts";
import { fmt, numberFlags, startAgent, startScript, stats } from "./support.ts";

const { seconds, rounds, concurrency } = numberFlags({ seconds: 3, rounds: 5, concurrency: 16 });

/** Sends the same request over keep-alive connections for `ms`; answers requests per second. */
async function load(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  ms: number,
): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const target = new URL("/api/v0/processes/start", url);
  const end = performance.now() + ms;
  let done = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        target,
        {
          method: "POST",
          agent,
          headers: {
            ...headers,
            "content-type": "application/json",
            "content-length": String(body.length),
          },
        },
        (res) => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.once("end", () => resolve());
        },
      );
      req.once("error", reject);
      req.end(body);
    });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await one();
        done++;
      }
    }),
  );
  const elapsed = performance.now() - t0;
  agent.destroy();
  return (done / elapsed) * 1000;
}

const dir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-"));
const bare = await startScript("bench/bare-fastify.mjs");
const agentProc = await startAgent(dir);
try {
  await new Promise((r) => setTimeout(r, 2_100)); // past the age margin, so age 0 runs
  const chatId = parseChatId(randomUUID())!;
  const toolCall = { chatId, messageId: toMessageId(1)!, toolCallId: "call_replay", ageMs: 0 };
  const body = Buffer.from(JSON.stringify({ command: "true" }));
  const client = new AgentClient({ baseUrl: agentProc.url });
  const started = await client.startProcess({ command: "true" }, { toolCall });
  await client.processOutput(started.id, { wait: true, chatId });
  client.close();
  const headers = toolCallRequestHeaders(chatId, toolCall);

  await load(bare.url, headers, body, 1000); // warm-up
  await load(agentProc.url, headers, body, 1000);
  const bareRps: number[] = [];
  const agentRps: number[] = [];
  for (let r = 0; r < rounds; r++) {
    bareRps.push(await load(bare.url, headers, body, seconds * 1000));
    agentRps.push(await load(agentProc.url, headers, body, seconds * 1000));
  }
  const b = stats(bareRps).median;
  const a = stats(agentRps).median;
  console.log(
    `replay of a finished start, ${rounds} rounds x ${seconds} s, ${concurrency} concurrent keep-alive connections`,
  );
  console.log(
    `bare Fastify constant route   median ${fmt(b, 0).padStart(7)} req/s   rounds ${bareRps.map((x) => fmt(x, 0)).join(" ")}`,
  );
  console.log(
    `agent replay (tool call)      median ${fmt(a, 0).padStart(7)} req/s   rounds ${agentRps.map((x) => fmt(x, 0)).join(" ")}`,
  );
  console.log(
    `ratio agent/bare: ${fmt(a / b, 2)}x (target >= 0.70: ${a / b >= 0.7 ? "MET" : "NOT MET"})`,
  );
} finally {
  await Promise.all([bare.stop(), agentProc.stop()]);
  await rm(dir, { recursive: true, force: true });
}
