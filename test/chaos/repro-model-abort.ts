// Reproduces two defects the campaign found (`npx tsx test/chaos/repro-model-abort.ts`):
// 1. A graceful stop (SIGTERM) in the middle of a model stream commits the cut-off stream as
//    the model's answer: the AI SDK ends `fullStream` with an `abort` part instead of
//    throwing, and generation.ts callModel commits what it has while the fence still holds.
// 2. A task attempt that runs out of its time (--task-timeout-ms) in the middle of a model
//    stream ends the chat in `error` ("Failed to process successful response"): the abort's
//    APICallError is not retryable, so runTaskWithRetry takes it for a permanent failure.
// Each case prints what a correct server does and what this one did.

import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { killAll, startTether, type TetherProcess } from "./procs.ts";

const SLOW = { text: Array.from({ length: 30 }, (_, i) => `w${i}`).join(" "), delayMs: 100 };
const FAST = { text: "the whole answer" };

interface Message {
  role: string;
  parts: { type: string; text?: string }[];
}

async function api<T>(server: TetherProcess, route: string, token?: string, body?: unknown) {
  const res = await fetch(new URL(route, server.url), {
    method: body === undefined ? "GET" : "POST",
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return (await res.json()) as T;
}

async function settled(server: TetherProcess, token: string, chat: string) {
  const by = Date.now() + 30_000;
  for (;;) {
    const c = await api<{ status: string; last_error?: { message: string } }>(
      server,
      `/api/v1/chats/${chat}`,
      token,
    );
    if (c.status === "waiting" || c.status === "error" || Date.now() > by) return c;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function run(
  name: string,
  extraArgs: string[],
  during: (fake: FakeProvider, restart: () => Promise<void>) => Promise<void>,
) {
  const fake = await startFakeProvider();
  fake.script(SLOW, FAST);
  const home = await mkdtemp(path.join(os.tmpdir(), "tether-repro-"));
  const args = [
    "server",
    "--listen",
    "127.0.0.1:0",
    "--data-dir",
    path.join(home, "data"),
    "--no-local-workspace",
    "--model",
    "openai-compatible:m",
    "--model-base-url",
    fake.url,
    ...extraArgs,
  ];
  let server = await startTether(args);
  try {
    const { token } = await api<{ token: string }>(server, "/api/v1/users/first", undefined, {
      email: "a@b.c",
      password: "a long enough password",
    });
    const chat = await api<{ id: string }>(server, "/api/v1/chats", token, { message: "hi" });
    await during(fake, async () => {
      await server.kill("SIGTERM");
      server = await startTether(args);
    });
    const c = await settled(server, token, chat.id);
    const { messages } = await api<{ messages: Message[] }>(
      server,
      `/api/v1/chats/${chat.id}/messages`,
      token,
    );
    const answer = messages
      .filter((m) => m.role === "assistant")
      .map((m) => m.parts.map((p) => p.text ?? "").join(""));
    console.log(`${name}:`);
    console.log(`  expected: status waiting, answer ${JSON.stringify([FAST.text])}`);
    console.log(
      `  got:      status ${c.status}${c.last_error ? ` (${c.last_error.message})` : ""}, ` +
        `answer ${JSON.stringify(answer)}, ${fake.requests.length} model requests`,
    );
  } finally {
    await killAll();
    await fake.close();
    await rm(home, { recursive: true, force: true });
  }
}

await run("1. SIGTERM mid-stream, then a restart", [], async (fake, restart) => {
  while (fake.requests.length === 0) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 1_500));
  await restart();
});
await run("2. a task attempt runs out mid-stream", ["--task-timeout-ms", "1000"], async () => {});
