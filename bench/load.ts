// Benchmark: the control plane under load. N concurrent chats, each `steps` model steps with
// one tool call (a foreground execute of `true`) and a final answer, through real
// `bin/tether server` replicas on a fresh Postgres database, real `bin/tether agent`
// processes and the fake model server, first against ONE replica, then against TWO on the
// same database. Prints steps per second, step latency (from the commit stamps), peak RSS of
// the servers and agents, wall time, and the scaling ratio of two replicas over one.
//
//   npm run bench:load                      # 1,000 chats x 5 steps
//   npm run bench:load -- --chats 100       # a quick run
//
// Postgres: TETHER_BENCH_DATABASE_URL, else TETHER_TEST_DATABASE_URL, else the local server;
// the benchmark creates its own database there and drops it at the end.

import { randomBytes } from "node:crypto";
import { closeSync, openSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { generateSecretKey } from "../src/chatd/secrets/index.ts";
import { startFakeProvider, type FakeChatRequest } from "../test/support/fake-provider.ts";
import {
  cpuSeconds,
  fmt,
  numberFlags,
  ROOT,
  startAgent,
  startChild,
  stats,
  treeCpuSeconds,
  type Child,
} from "./support.ts";

const { chats, steps, agents, concurrency, timeout } = numberFlags({
  chats: 1000,
  steps: 5,
  /** Workspace agents the chats are spread over (each chat's workspace is one of them). */
  agents: 2,
  /** Chat creations in flight at once. */
  concurrency: 64,
  /** Seconds: a phase that has not finished by then fails the run. */
  timeout: 1800,
});
/** The agent refuses calls committed within 2 s of its start (the age margin): wait it out. */
const AGENT_WARMUP_MS = 2_100;
const RSS_SAMPLE_MS = 100;
const POLL_MS = 200;

const baseUrl =
  process.env.TETHER_BENCH_DATABASE_URL ??
  process.env.TETHER_TEST_DATABASE_URL ??
  "postgres://postgres@127.0.0.1:5432/postgres";
const dbName = `tether_load_${randomBytes(6).toString("hex")}`;
const dbUrl = new URL(baseUrl);
dbUrl.pathname = `/${dbName}`;
// Every replica seals its secrets with the same key; the servers inherit it.
process.env.TETHER_SECRET_KEY ??= generateSecretKey();

/** The Postgres backends serving the benchmark's database now (this client's excepted). */
async function backends(db: pg.Client): Promise<number[]> {
  const r = await db.query<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
  );
  return r.rows.map((x) => x.pid);
}

/** Peak VmRSS (bytes) of each process, sampled until stopped. */
function sampleRss(pids: number[]): { stop(): Map<number, number> } {
  const peak = new Map<number, number>(pids.map((p) => [p, 0]));
  const sample = async () => {
    for (const pid of pids) {
      const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
      const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
      peak.set(pid, Math.max(peak.get(pid)!, kb * 1024));
    }
  };
  const timer = setInterval(() => void sample(), RSS_SAMPLE_MS);
  void sample();
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

async function api<T>(url: string, token: string | undefined, route: string, body?: unknown) {
  const res = await fetch(new URL(route, url), {
    method: body === undefined ? "GET" : "POST",
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${route}: ${res.status} ${await res.text()}`);
  return { status: res.status, body: (await res.json()) as T };
}

/** The admin's token: the first user on a fresh database, a login afterwards. */
async function adminToken(url: string): Promise<string> {
  const login = { email: "load@bench", password: "load bench password" };
  const first = await fetch(new URL("/api/v1/users/first", url), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(login),
  });
  if (first.status === 201) return ((await first.json()) as { token: string }).token;
  return (await api<{ token: string }>(url, undefined, "/api/v1/auth/login", login)).body.token;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (t: T, i: number) => Promise<R>) {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** Scrapes one sample value from a server's /metrics (0 when absent). */
async function metric(url: string, sample: string): Promise<number> {
  const text = await (await fetch(new URL("/metrics", url))).text();
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

interface PhaseResult {
  replicas: number;
  wallMs: number;
  stepsDone: number;
  stepLatency: { median: number; p99: number; n: number };
  /** Step 1 only: from the user message, so it includes the chat's acquisition. */
  firstStepLatency: { median: number; p99: number; n: number };
  serverRssPeak: number[];
  serverCpuS: number[];
  agentCpuS: number[];
  /** Each agent with its spawner and the commands it ran (treeCpuSeconds). */
  agentTreeCpuS: number[];
  benchCpuS: number;
  /** The replicas' Postgres backends (those alive at the end; a backend that closed is missed). */
  postgresCpuS: number;
  agentRssPeak: number[];
  failedChats: number;
  toolCallsPerReplica: number[];
  takeovers: number;
  logLines: number;
  logWarnings: number;
}

async function runPhase(
  db: pg.Client,
  fakeUrl: string,
  replicas: number,
  dir: string,
): Promise<PhaseResult> {
  const children: Child[] = [];
  const logFiles: string[] = [];
  try {
    const agentProcs: Child[] = [];
    for (let i = 0; i < agents; i++) {
      const ws = path.join(dir, `ws-${replicas}-${i}`);
      await mkdir(ws);
      const a = await startAgent(ws);
      agentProcs.push(a);
      children.push(a);
    }
    const agentsUp = performance.now();
    const servers: Child[] = [];
    for (let r = 0; r < replicas; r++) {
      const logFile = path.join(dir, `server-${replicas}-${r}.log`);
      logFiles.push(logFile);
      const fd = openSync(logFile, "w");
      try {
        const s = await startChild(
          path.join(ROOT, "bin/tether"),
          [
            "server",
            "--listen",
            "127.0.0.1:0",
            "--postgres-url",
            dbUrl.toString(),
            "--data-dir",
            path.join(dir, `data-${replicas}-${r}`),
            "--no-local-workspace",
            "--model",
            "openai-compatible:fake-model",
            "--model-base-url",
            fakeUrl,
          ],
          { stderr: fd },
        );
        servers.push(s);
        children.push(s);
      } finally {
        closeSync(fd); // the child has its own copy
      }
    }
    const token = await adminToken(servers[0]!.url);
    const workspaces: string[] = [];
    for (const [i, a] of agentProcs.entries()) {
      const w = await api<{ id: string }>(servers[0]!.url, token, "/api/v1/workspaces", {
        name: `load-${replicas}-${i}`,
        agent_url: a.url,
      });
      workspaces.push(w.body.id);
    }
    const wait = AGENT_WARMUP_MS - (performance.now() - agentsUp);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));

    const rss = sampleRss([...servers, ...agentProcs].map((c) => c.proc.pid!));
    const cpuBefore = await Promise.all(
      [...servers, ...agentProcs].map((c) => cpuSeconds(c.proc.pid!)),
    );
    const agentTreeBefore = await Promise.all(agentProcs.map((c) => treeCpuSeconds(c.proc.pid!)));
    const benchCpuBefore = process.cpuUsage();
    const pgCpuBefore = new Map<number, number>();
    for (const pid of await backends(db)) pgCpuBefore.set(pid, await cpuSeconds(pid));
    const t0 = performance.now();
    // Creations go round-robin to the replicas and the workspaces.
    const ids = await pool(
      Array.from({ length: chats }, (_, i) => i),
      concurrency,
      async (i) =>
        (
          await api<{ id: string }>(servers[i % replicas]!.url, token, "/api/v1/chats", {
            workspace_id: workspaces[i % workspaces.length],
            message: "go",
          })
        ).body.id,
    );
    let lastReport = performance.now();
    for (;;) {
      const r = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM chats WHERE id = ANY($1) AND status IN ('waiting', 'error')",
        [ids],
      );
      const done = r.rows[0]!.n;
      if (done === chats) break;
      if (performance.now() - t0 > timeout * 1000) {
        throw new Error(
          `${replicas} replica(s): only ${done}/${chats} chats done after ${timeout} s`,
        );
      }
      if (performance.now() - lastReport > 10_000) {
        lastReport = performance.now();
        console.error(`  ${replicas} replica(s): ${done}/${chats} chats done`);
      }
      await new Promise((res) => setTimeout(res, POLL_MS));
    }
    const wallMs = performance.now() - t0;
    const peaks = rss.stop();
    const benchCpu = process.cpuUsage(benchCpuBefore);
    let postgresCpuS = 0;
    for (const pid of await backends(db)) {
      postgresCpuS += (await cpuSeconds(pid)) - (pgCpuBefore.get(pid) ?? 0);
    }
    const cpu = (
      await Promise.all([...servers, ...agentProcs].map((c) => cpuSeconds(c.proc.pid!)))
    ).map((s, i) => s - cpuBefore[i]!);
    const agentTree = (await Promise.all(agentProcs.map((c) => treeCpuSeconds(c.proc.pid!)))).map(
      (s, i) => s - agentTreeBefore[i]!,
    );

    // Step i of a chat ends when its tool result commits (the database stamps every commit);
    // step 1 counts from the user message, so it includes acquisition.
    const marks = await db.query<{ chat_id: string; at_ms: number; completed: boolean | null }>(
      `SELECT chat_id, extract(epoch FROM created_at) * 1000 AS at_ms,
              CASE WHEN role = 'tool' THEN content -> 0 -> 'result' ->> 'status' = 'completed' END AS completed
       FROM chat_messages
       WHERE chat_id = ANY($1)
         AND (role = 'user' OR (role = 'tool' AND content -> 0 ->> 'type' = 'tool-result'))
       ORDER BY chat_id, id`,
      [ids],
    );
    const perStep: number[] = [];
    const firstStep: number[] = [];
    const completedPerChat = new Map<string, number>();
    let prev: { chat: string; at: number; first: boolean } | undefined;
    for (const m of marks.rows) {
      const at = Number(m.at_ms);
      if (m.completed !== null && prev?.chat === m.chat_id) {
        perStep.push(at - prev.at);
        if (prev.first) firstStep.push(at - prev.at);
      }
      if (m.completed === true)
        completedPerChat.set(m.chat_id, (completedPerChat.get(m.chat_id) ?? 0) + 1);
      prev = { chat: m.chat_id, at, first: m.completed === null };
    }
    const errors = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM chats WHERE id = ANY($1) AND status = 'error'",
      [ids],
    );
    const failedChats = Math.max(
      errors.rows[0]!.n,
      ids.filter((id) => completedPerChat.get(id) !== steps).length,
    );
    const toolCallsPerReplica: number[] = [];
    let takeovers = 0;
    for (const s of servers) {
      toolCallsPerReplica.push(
        await metric(s.url, 'tether_tool_calls_total{tool="execute",status="completed"}'),
      );
      takeovers += await metric(s.url, "tether_lease_takeovers_total");
    }
    await Promise.all(servers.map((s) => s.stop()));
    let logLines = 0;
    let logWarnings = 0;
    for (const f of logFiles) {
      for (const line of (await readFile(f, "utf8")).split("\n")) {
        if (line === "") continue;
        logLines += 1;
        if (/"level":(4|5|6)0/.test(line)) logWarnings += 1;
      }
    }
    return {
      replicas,
      wallMs,
      stepsDone: perStep.length,
      stepLatency: stats(perStep),
      firstStepLatency: stats(firstStep),
      serverRssPeak: servers.map((s) => peaks.get(s.proc.pid!)!),
      serverCpuS: cpu.slice(0, servers.length),
      agentCpuS: cpu.slice(servers.length),
      agentTreeCpuS: agentTree,
      benchCpuS: (benchCpu.user + benchCpu.system) / 1e6,
      postgresCpuS,
      agentRssPeak: agentProcs.map((a) => peaks.get(a.proc.pid!)!),
      failedChats,
      toolCallsPerReplica,
      takeovers,
      logLines,
      logWarnings,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

const mb = (bytes: number) => `${fmt(bytes / 2 ** 20, 0)} MB`;

function report(r: PhaseResult): string {
  const s = r.stepLatency;
  return [
    `${r.replicas} replica${r.replicas > 1 ? "s" : " "}:`,
    `steps/s ${fmt(r.stepsDone / (r.wallMs / 1000), 1).padStart(7)}`,
    `step p50 ${fmt(s.median, 1).padStart(8)} ms  p99 ${fmt(s.p99, 1).padStart(8)} ms`,
    `wall ${fmt(r.wallMs / 1000, 1).padStart(6)} s`,
    `server RSS peak ${r.serverRssPeak.map(mb).join(" + ")}`,
    `agent RSS peak ${r.agentRssPeak.map(mb).join(" + ")}`,
  ].join("   ");
}

function details(r: PhaseResult): string {
  return (
    `           steps ${r.stepsDone}/${chats * steps}, chats not completed ${r.failedChats}, ` +
    `first step (with acquisition) p50 ${fmt(r.firstStepLatency.median, 1)} ms ` +
    `p99 ${fmt(r.firstStepLatency.p99, 1)} ms\n           ` +
    `tool results committed per replica ${r.toolCallsPerReplica.join(" + ")}, ` +
    `takeovers ${r.takeovers}, log ${r.logLines} lines (${r.logWarnings} warn+)\n` +
    `           CPU seconds: server ${r.serverCpuS.map((c) => fmt(c, 1)).join(" + ")}, ` +
    `agent ${r.agentCpuS.map((c) => fmt(c, 1)).join(" + ")} ` +
    `(with its spawner and commands ${r.agentTreeCpuS.map((c) => fmt(c, 1)).join(" + ")}), ` +
    `Postgres backends ${fmt(r.postgresCpuS, 1)}, ` +
    `this process (fake model, polling) ${fmt(r.benchCpuS, 1)}`
  );
}

const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

const admin = new pg.Client({ connectionString: baseUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
const fake = await startFakeProvider();
const dir = await mkdtemp(path.join(os.tmpdir(), "tether-load-"));
const db = new pg.Client({ connectionString: dbUrl.toString() });
try {
  // Each request: one execute of `true` until the conversation holds `steps` tool results.
  fake.respond((req: FakeChatRequest) =>
    req.messages.filter((m) => m.role === "tool").length >= steps
      ? { text: "done" }
      : { toolCalls: [{ name: "execute", args: { command: "true" } }] },
  );
  await db.connect();
  console.log(
    `load: ${chats} concurrent chats x ${steps} steps (model step + execute \`true\` + commit), ` +
      `${agents} agent${agents > 1 ? "s" : ""}, Postgres database ${dbName}`,
  );
  console.log(`load average at start: ${loadavg()} (${os.cpus().length} cores)`);
  const one = await runPhase(db, fake.url, 1, dir);
  console.log(report(one));
  console.log(details(one));
  const two = await runPhase(db, fake.url, 2, dir);
  console.log(report(two));
  console.log(details(two));
  const ratio = two.stepsDone / two.wallMs / (one.stepsDone / one.wallMs);
  console.log(`scaling: 2 replicas / 1 replica = ${fmt(ratio, 2)}x steps/s`);
  console.log(`load average at end: ${loadavg()}`);
  if (one.failedChats + two.failedChats > 0) process.exitCode = 1;
} finally {
  await db.end().catch(() => undefined);
  await fake.close();
  await rm(dir, { recursive: true, force: true });
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}
