// Benchmark: one turn end to end, as a user sees it — a chat created with a message through the
// HTTP API of `bin/tether server` on Postgres, its turn (model step → `execute true` on a
// registered agent → model step) followed on the chat's SSE stream until `waiting` — against the
// same turn in an in-memory AI SDK loop, and as reference points two durable-loop libraries
// running the same turn: DBOS Transact (a workflow of model and tool steps) and LangGraph with
// its Postgres checkpointer (durability "sync"). All use the same fake model server (in a
// process of its own, bench/fake-model.ts, as a provider is) and the same agent (through the
// same tool code), in one run, the systems' turns interleaved; Tether's turn is timed from its
// create's request to the `waiting` its stream shows (closing the stream after it, about half a
// millisecond of the client's, is not the turn's). Prints median and p99 per turn,
// the ratio to the in-memory loop, and the transactions each system committed per turn on the
// server side: pg_stat_database xact_commit of a database of its own, read after it closed its
// connections (Tether's include its server's background rounds, such as the acquisition poll
// each second, over the run, and one per notification its listening connection receives: a
// backend reads the notification queue in a transaction of its own), and the CPU time of
// Tether's server process over the measured turns (/proc, 10 ms ticks); and where Tether's turn
// goes: its server's side from the create to the last commit, the client's side around it, and
// the in-memory turn's parts (model step, tool call, model step) beside them. Needs
// TETHER_BENCH_DATABASE_URL (or TETHER_TEST_DATABASE_URL): its server gets databases
// <name>_turn_tether, _turn_dbos and _turn_langgraph, dropped at the end.

import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { streamText, type ModelMessage } from "ai";
import { createParser } from "eventsource-parser";
import pg from "pg";
import { runTool, toolDeclarations } from "../src/chatd/tools/index.ts";
import { AgentClient, parseChatId, realClock, toMessageId } from "../src/contract/index.ts";
import { createLanguageModel } from "../src/model/index.ts";
import {
  cpuSeconds,
  fmt,
  numberFlags,
  rankOf,
  ROOT,
  startAgent,
  startChild,
  startFakeModel,
  stats,
  type Stats,
} from "./support.ts";

// 1,000 turns: the p99 is then the 10th-slowest turn. With 200 it was the 2nd, and its ratio to
// the in-memory loop's moved between 1.07x and 1.93x over nine runs of the same code.
const { turns, warmup } = numberFlags({ turns: 1000, warmup: 20 });
const baseUrl = process.env.TETHER_BENCH_DATABASE_URL ?? process.env.TETHER_TEST_DATABASE_URL;
if (!baseUrl) {
  console.log(
    "bench:turn needs Postgres: set TETHER_BENCH_DATABASE_URL (or TETHER_TEST_DATABASE_URL).",
  );
  process.exit(0);
}
const SSE_BOUND_MS = 60_000;
/** Longer than Postgres's PGSTAT_IDLE_INTERVAL: every backend has reported its commits by then. */
const STATS_FLUSH_MS = 11_000;

/** The URL of database `name` on the same server. */
function dbUrl(name: string): string {
  const u = new URL(baseUrl!);
  u.pathname = `/${name}`;
  return u.toString();
}
const baseName = new URL(baseUrl).pathname.slice(1) || "postgres";
const names = {
  tether: `${baseName}_turn_tether`,
  dbos: `${baseName}_turn_dbos`,
  langgraph: `${baseName}_turn_langgraph`,
};

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: baseUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function recreate(name: string): Promise<void> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
}

/**
 * Committed transactions of database `name` so far. Backends report their counts when they
 * go idle (at most once a second) and when they exit: read after the system closed its pool.
 */
async function xactCommit(name: string): Promise<number> {
  return admin(async (c) => {
    await c.query("SELECT pg_stat_clear_snapshot()");
    const r = await c.query<{ n: string }>(
      "SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = $1",
      [name],
    );
    return Number(r.rows[0]?.n ?? 0);
  });
}

// ---- the shared parts: the fake model, the agent, the tool ----------------------------------

// A turn: one execute of `true`, then text once its result is in the conversation.
const fake = await startFakeModel(1);
const model = await createLanguageModel({
  provider: "openai-compatible",
  model: "fake-model",
  baseUrl: fake.url,
});
const agentDir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-"));
const agentProc = await startAgent(agentDir);
await new Promise((r) => setTimeout(r, 2_100)); // past the agent's age margin
const client = new AgentClient({ baseUrl: agentProc.url });
let messageSeq = 0;

interface ToolCallPart {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

/** One model step: the assistant messages and the tool calls it asked for. */
async function modelStep(
  messages: ModelMessage[],
): Promise<{ messages: ModelMessage[]; calls: ToolCallPart[] }> {
  const result = streamText({ model, messages, tools: toolDeclarations(), maxRetries: 0 });
  const calls = await result.toolCalls;
  return {
    messages: (await result.response).messages,
    calls: calls.map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input })),
  };
}

/** Runs the calls through the agent (the worker's tool code); one tool message of results. */
async function toolStep(chatId: string, calls: ToolCallPart[]): Promise<ModelMessage> {
  const content = [];
  for (const call of calls) {
    const outcome = await runTool(
      {
        client,
        chatId: parseChatId(chatId)!,
        messageId: toMessageId(++messageSeq)!,
        toolCallAgeMs: 0,
        clock: realClock,
        agentAnswerTimeoutMs: 60_000,
        signal: new AbortController().signal,
      },
      call,
    );
    content.push({
      type: "tool-result" as const,
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      output: { type: "json" as const, value: outcome.result as never },
    });
  }
  return { role: "tool", content };
}

// ---- the systems ---------------------------------------------------------------------------

interface System {
  name: string;
  /** The database whose committed transactions are the system's, if it has one. */
  database?: string;
  setUp(): Promise<void>;
  /**
   * Runs one turn; resolves with the moment (performance.now()) the turn ended when the system
   * tidies up after it (Tether's client closes the stream after its `waiting`), else at the end.
   */
  turn(): Promise<number | void>;
  /** Closes every connection, so the server has counted every transaction. */
  tearDown(): Promise<void>;
  /** The process serving it, whose CPU time is counted (a system in this process has none). */
  pid?(): number | undefined;
  /** Lines about its last `turns` turns, read once it is torn down (its database is kept). */
  report?(): Promise<string[]>;
}

/** The median of `samples` and its p99, as "x ms (p99 y)". */
function medianAndP99(samples: number[]): string {
  const s = stats(samples);
  return `${fmt(s.median, 1)} ms (p99 ${fmt(s.p99, 1)})`;
}

/** Each in-memory turn's parts in order (model step, tool call, model step), in ms. */
const inMemoryParts: number[][] = [];
const inMemory: System = {
  name: "in-memory AI SDK loop (baseline)",
  setUp: async () => {},
  turn: async () => {
    const chatId = randomUUID();
    const messages: ModelMessage[] = [{ role: "user", content: "go" }];
    const parts: number[] = [];
    inMemoryParts.push(parts);
    for (;;) {
      let t = performance.now();
      const step = await modelStep(messages);
      parts.push(performance.now() - t);
      messages.push(...step.messages);
      if (step.calls.length === 0) return;
      t = performance.now();
      messages.push(await toolStep(chatId, step.calls));
      parts.push(performance.now() - t);
    }
  },
  tearDown: async () => {},
  // What Tether's server-side commits are set against: the same turn's parts without them.
  report: async () => {
    const measured = inMemoryParts.slice(-turns);
    const part = (i: number) => medianAndP99(measured.map((p) => p[i]!));
    return [
      `the in-memory turn's parts: model step ${part(0)}, tool call ${part(1)}, model step ${part(2)}`,
    ];
  },
};

/**
 * Tether from the checkout at `root` (this one unless an A/B run names others), on its own
 * database `database`.
 */
function tetherSystem(root = ROOT, database = names.tether, label = ""): System {
  let server: Awaited<ReturnType<typeof startChild>> | undefined;
  let api = "";
  let token = "";
  let workspaceId = "";
  let modelId = "";
  /**
   * Every turn in order: its chat (the stream's opening `chat` event names it), and when its
   * create was sent and its `waiting` read, in wall-clock ms (the clock the database's
   * timestamps read on this machine).
   */
  const seen: { chatId?: string; sent: number; waiting?: number }[] = [];
  const call = async (method: string, p: string, body?: unknown): Promise<unknown> => {
    const r = await fetch(`${api}${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
    return r.json();
  };
  /**
   * Creates a chat with its message and reads the chat's SSE stream, which the create answers
   * with (`Accept: text/event-stream`), until a `status` event says `waiting`: the turn ends
   * there (resolved with that moment); closing the stream after it is the client's tidying up.
   */
  const turnOnStream = async (): Promise<number> => {
    const turn: (typeof seen)[number] = { sent: performance.timeOrigin + performance.now() };
    seen.push(turn);
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), SSE_BOUND_MS);
    try {
      const r = await fetch(`${api}/api/v1/chats`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        body: JSON.stringify({ workspace_id: workspaceId, model_id: modelId, message: "go" }),
        signal: ac.signal,
      });
      if (r.status !== 201) throw new Error(`POST /api/v1/chats: ${r.status} ${await r.text()}`);
      let waitingAt: number | undefined;
      const parser = createParser({
        onEvent: (e) => {
          if (e.event === "chat") turn.chatId = (JSON.parse(e.data) as { id: string }).id;
          if (e.event !== "status") return;
          const s = (JSON.parse(e.data) as { status: string }).status;
          if (s === "error") throw new Error("a chat ended in error");
          if (s === "waiting" && waitingAt === undefined) {
            waitingAt = performance.now();
            turn.waiting = performance.timeOrigin + waitingAt;
          }
        },
      });
      const decoder = new TextDecoder();
      for await (const chunk of r.body!) {
        parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        if (waitingAt !== undefined) return waitingAt;
      }
      throw new Error("a chat's stream ended before waiting");
    } finally {
      clearTimeout(timer);
      ac.abort();
    }
  };
  return {
    name: `Tether: API → durable loop → SSE${label}`,
    database,
    setUp: async () => {
      await recreate(database);
      const dataDir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-data-"));
      process.env.TETHER_SECRET_KEY = randomBytes(32).toString("base64");
      server = await startChild(path.join(root, "bin/tether"), [
        "server",
        ...["--listen", "127.0.0.1:0", "--postgres-url", dbUrl(database)],
        ...["--data-dir", dataDir, "--no-local-workspace", "--log-level", "warn"],
      ]);
      api = server.url;
      const first = (await call("POST", "/api/v1/users/first", {
        email: "bench@example.com",
        password: "bench-password-1",
      })) as { token: string };
      token = first.token;
      modelId = (
        (await call("POST", "/api/v1/models", {
          provider: "openai-compatible",
          model: "fake-model",
          base_url: fake.url,
        })) as { id: string }
      ).id;
      workspaceId = (
        (await call("POST", "/api/v1/workspaces", {
          name: "bench",
          agent_url: agentProc.url,
        })) as { id: string }
      ).id;
    },
    turn: turnOnStream,
    tearDown: async () => {
      await server?.stop();
    },
    pid: () => server?.proc.pid,
    report: async () => {
      // The server's side of each measured turn on the database clock (transaction starts):
      // from the create to the last commit, and when each message in between committed; and
      // the client's side around it: its create sent to the create's transaction, and the last
      // commit to the `waiting` it read (wall clocks of one machine).
      const measured = seen.slice(-turns);
      const c = new pg.Client({ connectionString: dbUrl(database) });
      await c.connect();
      const r = await c
        .query<{ id: string; created: number; updated: number; span: number; at: number[] }>(
          `SELECT c.id, extract(epoch FROM c.created_at) * 1000 AS created,
                  extract(epoch FROM c.updated_at) * 1000 AS updated,
                  extract(epoch FROM c.updated_at - c.created_at) * 1000 AS span,
                  array_agg(extract(epoch FROM m.created_at - c.created_at) * 1000 ORDER BY m.id) AS at
           FROM chats c JOIN chat_messages m ON m.chat_id = c.id
           WHERE c.id = ANY($1) GROUP BY c.id ORDER BY span`,
          [measured.map((t) => t.chatId)],
        )
        .finally(() => c.end());
      const turn = (q: number) => {
        const t = r.rows[rankOf(r.rows.length, q)]!;
        return `${fmt(Number(t.span), 1)} ms (commits at ${t.at.map((x) => fmt(Number(x), 1)).join(", ")})`;
      };
      const byChat = new Map(measured.map((t) => [t.chatId, t]));
      const before = r.rows.map((t) => Number(t.created) - byChat.get(t.id)!.sent);
      const after = r.rows.map((t) => byChat.get(t.id)!.waiting! - Number(t.updated));
      return [
        `Tether's server side, create to last commit (database clock): median ${turn(0.5)}, p99 ${turn(0.99)}`,
        `Tether's client side: its create sent to the create's transaction ${medianAndP99(before)}, the last commit to \`waiting\` read on the stream ${medianAndP99(after)}`,
      ];
    },
  };
}

function dbosSystem(): System {
  const modelStepStep = (messages: ModelMessage[]) =>
    DBOS.runStep(() => modelStep(messages), { name: "model" });
  const toolStepStep = (chatId: string, calls: ToolCallPart[]) =>
    DBOS.runStep(() => toolStep(chatId, calls), { name: "tools" });
  const turnWorkflow = DBOS.registerWorkflow(
    async (chatId: string) => {
      const messages: ModelMessage[] = [{ role: "user", content: "go" }];
      for (;;) {
        const step = await modelStepStep(messages);
        messages.push(...step.messages);
        if (step.calls.length === 0) return;
        messages.push(await toolStepStep(chatId, step.calls));
      }
    },
    { name: "turn" },
  );
  return {
    name: "DBOS Transact workflow (reference)",
    database: names.dbos,
    setUp: async () => {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${names.dbos} WITH (FORCE)`));
      DBOS.setConfig({
        name: "tether-bench",
        systemDatabaseUrl: dbUrl(names.dbos),
        logLevel: "error",
        runAdminServer: false,
      });
      await DBOS.launch();
    },
    turn: async () => {
      await turnWorkflow(randomUUID());
    },
    tearDown: async () => {
      await DBOS.shutdown();
    },
  };
}

function langgraphSystem(): System {
  const State = Annotation.Root({
    chatId: Annotation<string>(),
    messages: Annotation<ModelMessage[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    calls: Annotation<ToolCallPart[]>({ reducer: (_, b) => b, default: () => [] }),
  });
  let saver: PostgresSaver | undefined;
  let graph: ReturnType<typeof build> | undefined;
  function build(checkpointer: PostgresSaver) {
    return new StateGraph(State)
      .addNode("model", async (s) => {
        const step = await modelStep(s.messages);
        return { messages: step.messages, calls: step.calls };
      })
      .addNode("tools", async (s) => ({ messages: [await toolStep(s.chatId, s.calls)] }))
      .addEdge(START, "model")
      .addConditionalEdges("model", (s) => (s.calls.length > 0 ? "tools" : END))
      .addEdge("tools", "model")
      .compile({ checkpointer });
  }
  return {
    name: "LangGraph + PostgresSaver, sync (reference)",
    database: names.langgraph,
    setUp: async () => {
      await recreate(names.langgraph);
      saver = PostgresSaver.fromConnString(dbUrl(names.langgraph));
      await saver.setup();
      graph = build(saver);
    },
    turn: async () => {
      const chatId = randomUUID();
      await graph!.invoke(
        { chatId, messages: [{ role: "user", content: "go" }] },
        { configurable: { thread_id: chatId }, durability: "sync" },
      );
    },
    tearDown: async () => {
      await saver?.end();
    },
  };
}

// ---- the run ---------------------------------------------------------------------------------

interface Result {
  stats: Stats;
  xactPerTurn?: number;
  cpuMsPerTurn?: number;
}

/**
 * Every system set up and warmed up, then the turns interleaved (one of each in turn), so a
 * change of the machine's load weighs on all alike; then every system closed, and the
 * transactions each database committed meanwhile read.
 */
async function measureAll(all: System[]): Promise<Map<string, Result>> {
  const samples = new Map<string, number[]>(all.map((s) => [s.name, []]));
  const before = new Map<string, number>();
  const cpuBefore = new Map<string, number>();
  const cpuMs = new Map<string, number>();
  const ready: System[] = [];
  try {
    for (const s of all) {
      await s.setUp();
      ready.push(s);
      for (let i = 0; i < warmup; i++) await s.turn();
    }
    // A backend reports its commits at most once a second, at a transaction's end, and an idle
    // one only after PGSTAT_IDLE_INTERVAL (10 s): without this wait, commits of the set-up
    // and warm-up (migrations, the first user) would be reported inside the measured turns.
    await new Promise((r) => setTimeout(r, STATS_FLUSH_MS));
    for (const s of all) if (s.database) before.set(s.name, await xactCommit(s.database));
    for (const s of all) {
      const pid = s.pid?.();
      if (pid !== undefined) cpuBefore.set(s.name, await cpuSeconds(pid));
    }
    for (let i = 0; i < turns; i++) {
      for (const s of all) {
        const t0 = performance.now();
        const ended = (await s.turn()) ?? performance.now();
        samples.get(s.name)!.push(ended - t0);
      }
    }
    for (const s of all) {
      const pid = s.pid?.();
      if (pid !== undefined)
        cpuMs.set(s.name, ((await cpuSeconds(pid)) - cpuBefore.get(s.name)!) * 1000);
    }
  } finally {
    for (const s of ready) await s.tearDown();
  }
  // What the last backends report at exit lands shortly after they closed.
  await new Promise((r) => setTimeout(r, 500));
  const results = new Map<string, Result>();
  for (const s of all) {
    const after = s.database ? await xactCommit(s.database) : 0;
    results.set(s.name, {
      stats: stats(samples.get(s.name)!),
      ...(s.database && { xactPerTurn: (after - before.get(s.name)!) / turns }),
      ...(cpuMs.has(s.name) && { cpuMsPerTurn: cpuMs.get(s.name)! / turns }),
    });
  }
  return results;
}

const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
// BENCH_TETHER_ROOTS=/a,/b: an A/B run of two (or more) checkouts of Tether, each with its
// own server and database, their turns interleaved with the in-memory loop's (the reference
// systems left out). Each checkout needs its node_modules and a first `bin/tether --help`.
const roots = process.env.BENCH_TETHER_ROOTS?.split(",").filter(Boolean) ?? [];
const abDatabases = roots.map((_, i) => `${names.tether}_${i}`);
const systems =
  roots.length > 0
    ? [inMemory, ...roots.map((r, i) => tetherSystem(r, abDatabases[i], ` (${r})`))]
    : [inMemory, tetherSystem(), dbosSystem(), langgraphSystem()];
console.log(`load average at start: ${load()} (${os.cpus().length} cores)`);
try {
  const results = await measureAll(systems);
  const base = results.get(inMemory.name)!.stats;
  console.log(
    `one turn (model step → execute \`true\` → model step), ${turns} turns per system after ${warmup} warm-up, systems interleaved`,
  );
  console.log(
    "system                                         median ms  p99 ms  median/mem  p99/mem  commits/turn",
  );
  for (const [name, r] of results) {
    console.log(
      `${name.padEnd(46)}${fmt(r.stats.median, 2).padStart(10)}${fmt(r.stats.p99, 2).padStart(8)}${fmt(r.stats.median / base.median, 2).padStart(11)}x${fmt(r.stats.p99 / base.p99, 2).padStart(8)}x${(r.xactPerTurn === undefined ? "-" : fmt(r.xactPerTurn, 1)).padStart(14)}`,
    );
  }
  const t = results.get(systems[1]!.name)!;
  const met = (ok: boolean) => (ok ? "MET" : "NOT MET");
  const ratio = (x: number, of: number) => `${fmt(x / of, 2)}x ${met(x / of <= 1.6)}`;
  console.log(
    `target: Tether within 1.6x of in-memory: median ${ratio(t.stats.median, base.median)}, p99 ${ratio(t.stats.p99, base.p99)}; commits per turn <= 8: ${fmt(t.xactPerTurn ?? NaN, 1)} ${met((t.xactPerTurn ?? Infinity) <= 8)}`,
  );
  const references = systems.slice(2).map((s) => results.get(s.name)!.stats);
  if (roots.length === 0)
    console.log(
      `target: Tether ahead of DBOS and LangGraph: median ${met(references.every((r) => t.stats.median < r.median))}, p99 ${met(references.every((r) => t.stats.p99 < r.p99))}`,
    );
  if (t.cpuMsPerTurn !== undefined)
    console.log(
      `Tether server CPU per turn: ${fmt(t.cpuMsPerTurn, 1)} ms (its process, over the measured turns; its background rounds while the other systems ran included)`,
    );
  for (const s of systems) for (const l of (await s.report?.()) ?? []) console.log(l);
  console.log(`load average at end: ${load()}`);
} finally {
  client.close();
  await agentProc.stop();
  await fake.stop();
  await rm(agentDir, { recursive: true, force: true });
  await admin(async (c) => {
    for (const n of [...Object.values(names), ...abDatabases])
      await c.query(`DROP DATABASE IF EXISTS ${n} WITH (FORCE)`);
  });
}
