// Benchmark 3: memory. The agent keeps tool call state per chat, never per tool call. Drives a
// real agent (in-process, every request through Fastify and the middleware) with write-file
// tool calls, each in a newer message, and reads the heap after forced GC:
// 10,000 chats x 10 calls gives bytes per chat; then 1,000 more chats measured at 10 and at
// 100 calls per chat (10x) shows more calls per chat do not grow it. Run with --expose-gc.

import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { inject } from "light-my-request";
import { createAgentServer } from "../src/agent/index.ts";
import {
  ManualClock,
  parseChatId,
  toMessageId,
  toolCallRequestHeaders,
  type ChatId,
} from "../src/contract/index.ts";
import { fmt, numberFlags } from "./support.ts";

const { chats, calls, growthChats } = numberFlags({ chats: 10_000, calls: 10, growthChats: 1_000 });

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("Run with node --expose-gc (npm run bench:memory does).");
function heap(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

// Files on tmpfs where there is one: the bench measures the agent's memory, not the disk's fsync.
const dir = await mkdtemp(
  path.join(existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(), "tether-bench-"),
);
const clock = new ManualClock();
const agent = await createAgentServer({ dir, clock });
clock.advance(60_000); // up for a minute: age 0 runs

async function drive(ids: ChatId[], fromMessage: number, toMessage: number): Promise<void> {
  for (let m = fromMessage; m <= toMessage; m++) {
    for (const [i, chatId] of ids.entries()) {
      const headers = toolCallRequestHeaders(chatId, {
        messageId: toMessageId(m)!,
        toolCallId: "call_write",
        ageMs: 0,
      });
      const res = await inject(agent.handle, {
        method: "POST",
        url: `/api/v0/write-file?path=${encodeURIComponent(path.join(dir, `f${i % 100}.txt`))}`,
        headers: { ...headers, "content-type": "application/octet-stream" },
        payload: Buffer.from(`message ${m}\n`),
      });
      if (res.statusCode !== 200)
        throw new Error(`write-file answered ${res.statusCode}: ${res.body}`);
    }
  }
}

const newChats = (n: number) => Array.from({ length: n }, () => parseChatId(randomUUID())!);

try {
  // Warm every code path first so the baseline includes compiled code, not just an empty map.
  await drive(newChats(100), 1, 2);
  const base = heap();
  const main = newChats(chats);
  await drive(main, 1, calls);
  const afterMain = heap();
  const perChat = (afterMain - base) / chats;

  const growth = newChats(growthChats);
  await drive(growth, 1, calls);
  const at10 = heap();
  await drive(growth, calls + 1, calls * 10);
  const at100 = heap();

  console.log(
    `agent heap, write-file tool calls through the middleware, each call in a newer message`,
  );
  console.log(
    `${chats} chats x ${calls} calls: heap +${fmt((afterMain - base) / 1e6, 1)} MB, ${fmt(perChat, 0)} bytes per chat`,
  );
  console.log(
    `${growthChats} chats at ${calls} calls/chat -> ${calls * 10} calls/chat (10x): heap ${fmt(at10 / 1e6, 1)} MB -> ${fmt(at100 / 1e6, 1)} MB, ` +
      `${fmt((at100 - at10) / growthChats, 0)} bytes per chat of growth (${fmt(((at100 - at10) / growthChats / perChat) * 100, 1)}% of a chat's state)`,
  );
  console.log(`chats with state in the store: ${agent.store.chatCount}`);
} finally {
  await agent.close();
  await rm(dir, { recursive: true, force: true });
}
