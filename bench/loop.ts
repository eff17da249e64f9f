// Benchmark: per-step overhead of the durable chat loop. A step is one model call that asks
// for one `execute` of `true`, the tool call through the agent, and the commit. The baseline
// is an in-memory AI SDK loop that calls the same agent through the same tool code with the
// same fake model server, with no database, worker or runner. Run on PGlite, and on Postgres
// when TETHER_BENCH_DATABASE_URL (or TETHER_TEST_DATABASE_URL) is set. Targets (issue 15): within
// 1.25x on Postgres and 1.5x on PGlite (median), at most 8 round trips per step.
// Then the same steps in chats that already hold `--earlier` (1,000) messages before a
// compaction boundary, next to fresh chats: a step reads history from the boundary on, so
// its cost does not grow with the chat's length (docs/prompt.md; target 1.1x).
// Also prints the worker's database round trips per step, by statement (the statements sent
// during its own turns, the final text step, turn finish and the 50 ms acquisition poll
// included, over chats x steps), and its committed transactions per turn.
// The loops run in rounds — a turn of the in-memory loop, one on PGlite, one on Postgres, the
// first of each round taking turns — so whatever else the machine does meanwhile falls on all
// of them alike. A durable step ends when its result's commit answers, stamped in this process
// (StampingFeed); each loop, the in-memory one too, runs one uncounted turn first, and each
// counts `--chats` (40) turns: 200 steps, so a p99 is not one step's hiccup.

import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { streamText, type ModelMessage } from "ai";
import { openDatabase, type Database } from "../src/chatd/db/index.ts";
import { MessageFeed, type HistoryMove } from "../src/chatd/message-feed.ts";
import { StreamBuffer } from "../src/chatd/stream.ts";
import { runTool, toolDeclarations } from "../src/chatd/tools/index.ts";
import {
  createChat,
  loadChat,
  loadHistory,
  loadModelHistory,
  sendMessage,
} from "../src/chatd/transitions/index.ts";
import { Worker } from "../src/chatd/worker/worker.ts";
import { AgentClient, parseChatId, realClock, toMessageId } from "../src/contract/index.ts";
import { FREE } from "../src/chatd/billing.ts";
import { createLanguageModel } from "../src/model/index.ts";
import { startFakeProvider } from "../test/support/fake-provider.ts";
import { CountingDatabase, roundTripLines } from "./round-trips.ts";
import { fmt, numberFlags, startAgent, stats } from "./support.ts";

const { chats, steps, earlier } = numberFlags({ chats: 40, steps: 5, earlier: 1_000 });

const fake = await startFakeProvider();
let callSeq = 0;
// Every request: one execute of `true`, until the conversation holds `steps` tool results.
// Enough answers for every turn of the run (steps + 1 requests each): the in-memory loop's, the
// PGlite and Postgres loops' (each `chats` and one of warm-up) and the fresh and long chats'
// (2 x `chats` and one), and a margin for retried attempts.
fake.script(
  ...Array.from(
    { length: (5 * chats + 4) * (steps + 1) + 100 },
    () => (req: { messages: { role: string }[] }) => {
      const done = req.messages.filter((m) => m.role === "tool").length;
      return done >= steps
        ? { text: "done" }
        : { toolCalls: [{ id: `call_${++callSeq}`, name: "execute", args: { command: "true" } }] };
    },
  ),
);
const model = () =>
  createLanguageModel({ provider: "openai-compatible", model: "fake-model", baseUrl: fake.url });
const dir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-"));
const agentProc = await startAgent(dir);
await new Promise((r) => setTimeout(r, 2_100)); // past the agent's age margin
const client = new AgentClient({ baseUrl: agentProc.url });

/**
 * The worker's feed of committed messages, stamping each message with the moment its commit
 * answered (performance.now(), in this process): a step's end. The database's own stamps cannot
 * say it — `now()` is a transaction's start, and PGlite's clock counts whole milliseconds, which
 * rounds a 10 ms step by up to 10 %.
 */
class StampingFeed extends MessageFeed {
  readonly committedAt = new Map<string, number>();
  override publish(chatId: string, moved: HistoryMove): void {
    const at = performance.now();
    for (const m of moved.messages) this.committedAt.set(m.id, at);
    super.publish(chatId, moved);
  }
}

/** The in-memory loop: the same model, tools and agent; history in an array. */
async function inMemoryTurn(): Promise<number[]> {
  const messages: ModelMessage[] = [{ role: "user", content: "go" }];
  const chatId = parseChatId(randomUUID())!;
  const perStep: number[] = [];
  for (let i = 1; ; i++) {
    const t0 = performance.now();
    const result = streamText({
      model: await model(),
      messages,
      tools: toolDeclarations(),
      maxRetries: 0,
    });
    const calls = await result.toolCalls;
    if (calls.length === 0) break;
    messages.push(...(await result.response).messages);
    for (const call of calls) {
      const outcome = await runTool(
        {
          client,
          chatId,
          messageId: toMessageId(i)!,
          toolCallAgeMs: 0,
          clock: realClock,
          agentAnswerTimeoutMs: 60_000,
          signal: new AbortController().signal,
        },
        { toolCallId: call.toolCallId, toolName: call.toolName, input: call.input },
      );
      messages.push({
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: call.toolCallId,
            toolName: call.toolName,
            output: { type: "json", value: outcome.result as never },
          },
        ],
      });
    }
    perStep.push(performance.now() - t0);
  }
  return perStep;
}

/**
 * Puts `n` earlier messages (user and assistant text, then one tool result each tenth) and a
 * compaction boundary after them into an idle chat, as a long chat that compacted has.
 */
async function seedEarlier(db: Database, chatId: string, n: number): Promise<void> {
  await db.query(
    `INSERT INTO chat_messages (chat_id, role, visibility, content)
     SELECT $1, CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END, 'both',
            jsonb_build_array(jsonb_build_object('type', 'text', 'text', repeat('earlier message ', 20) || i))
     FROM generate_series(1, $2::int) AS i ORDER BY i`,
    [chatId, n],
  );
  await db.query(
    `INSERT INTO chat_messages (chat_id, role, visibility, content, boundary)
     VALUES ($1, 'system', 'both', $2, true)`,
    [
      chatId,
      JSON.stringify([
        {
          type: "compaction",
          summary: "The user asked for earlier things; all done.",
          messages_compacted: n,
          prompt_tokens_before: null,
          reason: "threshold",
          turn_complete: true,
        },
      ]),
    ],
  );
}

/** A durable loop: a worker on its database, and the chats it runs one turn at a time. */
interface DurableLoop {
  /** The worker's statements, counted during its turns only (not the others' in between). */
  readonly counted: CountingDatabase;
  /**
   * One chat's turn, with `earlier` messages before a boundary (0: a fresh chat): each step's
   * time, from the message's commit to its tool result's (StampingFeed).
   */
  turn(earlier?: number): Promise<number[]>;
  stop(): Promise<void>;
}

/** A worker on `db`, warmed up by one uncounted turn (as the in-memory loop's first is). */
async function durableLoop(db: Database): Promise<DurableLoop> {
  const userId = randomUUID();
  const workspaceId = randomUUID();
  const modelId = randomUUID();
  await db.query(
    "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'admin', 'x')",
    [userId, `${userId}@bench`],
  );
  await db.query(
    "INSERT INTO workspaces (id, name, agent_url, owner_id) VALUES ($1, 'bench', $2, $3)",
    [workspaceId, agentProc.url, userId],
  );
  await db.query(
    "INSERT INTO model_configs (id, provider, model, base_url) VALUES ($1, 'openai-compatible', 'fake-model', $2)",
    [modelId, fake.url],
  );
  const m = await model();
  const counted = new CountingDatabase(db);
  const feed = new StampingFeed();
  const worker = new Worker({
    db: counted,
    feed,
    buffer: new StreamBuffer(),
    agentAnswerTimeoutMs: 60_000,
    toolResultBudgetBytes: 32 * 1024,
    acquireIntervalMs: 50,
    resolveModel: async () => ({ model: m, prices: FREE }),
    resolveAgent: async () => client,
  });
  await worker.start();
  const turn = async (n = 0): Promise<number[]> => {
    const chat = await createChat(db, {
      ownerId: userId,
      workspaceId,
      modelConfigId: modelId,
      ...(n === 0 && { message: "go" }),
    });
    let sent = performance.now();
    if (n > 0) {
      await seedEarlier(db, chat.id, n);
      await sendMessage(db, chat.id, userId, "go", "queue");
      sent = performance.now();
    }
    while ((await loadChat(db, chat.id))!.status !== "waiting")
      await new Promise((r) => setTimeout(r, 20));
    // The first step starts when the message is in; each step ends when its result commits.
    const history = await loadHistory(db, chat.id);
    const since = history.slice(history.findLastIndex((h) => h.boundary) + 1);
    const marks = [
      sent,
      ...since
        .filter((h) => h.content.some((p) => p.type === "tool-result"))
        .map((h) => feed.committedAt.get(h.id)!),
    ];
    return marks.slice(1).map((t, i) => t - marks[i]!);
  };
  await turn();
  return {
    counted,
    turn: async (n) => {
      counted.start();
      try {
        return await turn(n);
      } finally {
        counted.stop();
      }
    },
    stop: () => worker.stop(),
  };
}

function line(name: string, samples: number[], base?: number[]): string {
  const s = stats(samples);
  const ratio = base
    ? `   median ratio ${fmt(s.median / stats(base).median, 2)}x, p99 ratio ${fmt(s.p99 / stats(base).p99, 2)}x`
    : "";
  return `${name.padEnd(34)} median ${fmt(s.median, 2).padStart(7)} ms   p99 ${fmt(s.p99, 2).padStart(7)} ms   n=${s.n}${ratio}`;
}

/** The statements, commits and target of one durable loop's turns against the baseline. */
function report(
  name: string,
  target: number,
  loop: DurableLoop,
  durable: number[],
  base: number[],
) {
  const { counted } = loop;
  console.log(line(`durable loop, ${name}`, durable, base));
  for (const l of roundTripLines(counted, chats * steps, "step")) console.log(l);
  console.log(`committed transactions per turn: ${fmt(counted.commits / chats, 2)}`);
  const ratio = stats(durable).median / stats(base).median;
  const trips = counted.total / (chats * steps);
  console.log(
    `target on ${name.split(" ")[0]}: within ${target}x of the in-memory loop (median): ${ratio <= target ? "MET" : "NOT MET"}; round trips per step <= 8: ${trips <= 8 ? "MET" : "NOT MET"}`,
  );
}

const url = process.env.TETHER_BENCH_DATABASE_URL ?? process.env.TETHER_TEST_DATABASE_URL;
const schema = `bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pglite = await openDatabase({});
const pg = url ? await openDatabase({ postgresUrl: url, schema }) : undefined;
const loops: DurableLoop[] = [];
try {
  await inMemoryTurn(); // warm-up
  const pgliteLoop = await durableLoop(pglite);
  loops.push(pgliteLoop);
  const pgLoop = pg && (await durableLoop(pg));
  if (pgLoop) loops.push(pgLoop);
  // In rounds: a turn of each loop, the first one taking turns, so that whatever else the
  // machine does while the benchmark runs falls on every loop alike.
  const memory: number[] = [];
  const onPglite: number[] = [];
  const onPg: number[] = [];
  const runs = [
    async () => memory.push(...(await inMemoryTurn())),
    async () => onPglite.push(...(await pgliteLoop.turn())),
    ...(pgLoop ? [async () => onPg.push(...(await pgLoop.turn()))] : []),
  ];
  for (let c = 0; c < chats; c++)
    for (let k = 0; k < runs.length; k++) await runs[(c + k) % runs.length]!();
  console.log(
    `per-step latency: ${chats} chats x ${steps} steps (model step + execute \`true\` + commit), the loops in rounds`,
  );
  console.log(line("in-memory AI SDK loop (baseline)", memory));
  report("PGlite (embedded)", 1.5, pgliteLoop, onPglite, memory);
  if (pgLoop) report("Postgres", 1.25, pgLoop, onPg, memory);
  else
    console.log(
      "Postgres run skipped: set TETHER_BENCH_DATABASE_URL (or TETHER_TEST_DATABASE_URL).",
    );
  // A long chat (compacted) next to a fresh one, on PGlite, in turns.
  const fresh: number[] = [];
  const long: number[] = [];
  for (let c = 0; c < chats; c++) {
    fresh.push(...(await pgliteLoop.turn(0)));
    long.push(...(await pgliteLoop.turn(earlier)));
  }
  console.log(line("durable loop, fresh chats", fresh));
  console.log(line(`durable loop, ${earlier} earlier messages`, long, fresh));
  const r = await pglite.query<{ id: string }>(
    "SELECT chat_id AS id FROM chat_messages GROUP BY chat_id ORDER BY count(*) DESC LIMIT 1",
  );
  const longest = r.rows[0]!.id;
  const read = async (f: () => Promise<unknown>) => {
    const t: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      await f();
      t.push(performance.now() - t0);
    }
    return t;
  };
  const whole = await read(() => loadHistory(pglite, longest));
  const bounded = await read(() => loadModelHistory(pglite, longest));
  console.log(line(`read the whole history (${earlier}+)`, whole));
  console.log(line("read a step's history (boundary on)", bounded, whole));
  console.log(
    `target: a step of a ${earlier}-message chat within 1.1x of a fresh chat's: ${stats(long).median / stats(fresh).median <= 1.1 ? "MET" : "NOT MET"} on PGlite`,
  );
} finally {
  for (const l of loops) await l.stop();
  await pglite.close();
  if (pg) {
    await pg.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
    await pg.close();
  }
  client.close();
  await agentProc.stop();
  await fake.close();
  await rm(dir, { recursive: true, force: true });
}
