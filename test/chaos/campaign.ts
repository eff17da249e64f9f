// A fault campaign: shared server replicas on a fresh Postgres database, then scenarios one
// after the other. A scenario starts its own workspace agents — listening ones behind fault
// proxies, and dial-out ones (`tether agent --server`) whose connection runs through a TCP
// front to the live replicas — runs `concurrency` chats on seeded plans, injects faults at
// seeded moments (replica SIGKILL and replacement, agent restarts, silent agents, per-request
// proxy faults, dial-out connections cut, cut on an answer, or frozen, interrupts, messages
// that queue or interrupt; short task-attempt timeouts on some replicas), then stops the
// faults, lets everything settle, and checks what is left (checker.ts).

import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { Queryable, Row } from "../../src/chatd/db/index.ts";
import { mintAgentToken } from "../../src/workspaces/agent-tokens.ts";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { hostPort, startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";
import { WorkspaceAgent } from "./agents.ts";
import { check, type ScenarioHistory, type Violation } from "./checker.ts";
import { readChats, readEvidence } from "./collect.ts";
import { ANCHOR, MAX_SLEEP_MS, PLAN_PREFIX, makePlan, planResponder, type Plan } from "./model.ts";
import { killAll } from "./procs.ts";
import { FaultProxy } from "./proxy.ts";
import { Replicas, createCampaignDatabase, type Replica } from "./replicas.ts";
import { Rng, deriveSeed } from "./rng.ts";

export interface CampaignOptions {
  seed: number;
  scenarios: number;
  /** Replay exactly these scenario seeds instead of deriving `scenarios` from `seed`. */
  scenarioSeeds?: number[];
  /** Chats running at once in each scenario. */
  concurrency: number;
  /** Scenarios running at once on the shared replicas (their faults hit each other too). */
  parallel?: number;
  replicas: number;
  agentsPerScenario: number;
  /** Every `dialoutEvery`-th agent of a scenario (the 2nd, 4th, …) dials out; 0: none does. */
  dialoutEvery: number;
  /** A Postgres server where the campaign may create and drop its own database. */
  postgresUrl: string;
  leaseMs: number;
  heartbeatMs: number;
  agentAnswerTimeoutMs: number;
  /** Faults are injected during this window after the chats start. */
  faultWindowMs: number;
  /**
   * Longest delay of a request in transit. Kept under the contract's 2 s age margin by
   * default: a longer one lets a restarted agent run a call whose age header went stale on
   * the way, which the contract does not promise to catch (a stress run may raise it).
   */
  maxRequestDelayMs: number;
  /** After the faults stop, chats must be settled within this time. */
  settleMs: number;
  /** Keep the logs and workspaces even without violations. */
  keepWorkDir?: boolean;
  log: (line: string) => void;
}

export const DEFAULTS: Omit<CampaignOptions, "seed" | "scenarios" | "postgresUrl" | "log"> = {
  concurrency: 4,
  replicas: 3,
  agentsPerScenario: 2,
  dialoutEvery: 2,
  leaseMs: 3_000,
  heartbeatMs: 500,
  agentAnswerTimeoutMs: 3_000,
  faultWindowMs: 10_000,
  maxRequestDelayMs: 1_500,
  settleMs: 60_000,
};

/**
 * Task-attempt timeouts of the replicas, in start order (undefined: the 15-minute default):
 * short ones expire attempts mid-batch and mid-stream, so tasks are retried (CHATD.md 4).
 */
const TASK_TIMEOUTS: (number | undefined)[] = [2_000, undefined, 4_000];

export interface Stats {
  scenarios: number;
  chats: number;
  faults: number;
  faultsByKind: Record<string, number>;
  toolCalls: number;
  results: Record<string, number>;
  /** Running chats that a killed replica owned, which another replica had to take over. */
  failovers: number;
  /** Interrupts (and interrupting messages) that reached a running chat. */
  interrupts: number;
  chatsInError: number;
  /** Dial-out agents started, the tool calls of their chats, and their connections made. */
  dialoutAgents: number;
  dialoutToolCalls: number;
  dialoutConnects: number;
}

export interface CampaignResult {
  stats: Stats;
  violations: Violation[];
  /** Directory (logs, workspaces) kept for inspection when there were violations. */
  workDir?: string;
  /** The campaign's database, kept when there were violations. */
  databaseUrl?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class Campaign {
  readonly stats: Stats = {
    scenarios: 0,
    chats: 0,
    faults: 0,
    faultsByKind: {},
    toolCalls: 0,
    results: {},
    failovers: 0,
    interrupts: 0,
    chatsInError: 0,
    dialoutAgents: 0,
    dialoutToolCalls: 0,
    dialoutConnects: 0,
  };
  readonly violations: Violation[] = [];
  readonly plans = new Map<string, Plan>();
  token = "";
  pending: Promise<unknown>[] = [];

  constructor(
    readonly o: CampaignOptions,
    readonly replicas: Replicas,
    readonly db: pg.Pool,
    readonly workDir: string,
  ) {}

  fault(kind: string, n = 1): void {
    this.stats.faults += n;
    this.stats.faultsByKind[kind] = (this.stats.faultsByKind[kind] ?? 0) + n;
  }

  /**
   * An API call to a live replica (`pick` chooses which), tried again on another when it fails. `beforeRetry` runs
   * before each retry and may answer instead: a request whose answer was lost may have been
   * done (its replica killed after the commit).
   */
  async api<T>(
    method: string,
    route: string,
    body?: unknown,
    pick?: Rng,
    beforeRetry?: () => Promise<T | undefined>,
  ): Promise<T> {
    let lastErr: unknown;
    for (let attempt = 0; attempt < 20; attempt++) {
      if (attempt > 0 && beforeRetry) {
        const done = await beforeRetry().catch(() => undefined);
        if (done !== undefined) return done;
      }
      const live = this.replicas.live;
      if (live.length === 0) {
        await sleep(200);
        continue;
      }
      const r = pick && attempt === 0 ? pick.pick(live) : live[attempt % live.length]!;
      try {
        const res = await fetch(new URL(route, r.url), {
          method,
          headers: {
            ...(this.token && { authorization: `Bearer ${this.token}` }),
            ...(body !== undefined && { "content-type": "application/json" }),
          },
          ...(body !== undefined && { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(15_000),
        });
        if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
        return (await res.json()) as T;
      } catch (err) {
        lastErr = err;
        await sleep(100);
      }
    }
    throw lastErr;
  }

  /** The TCP fronts of the dial-out agents running now, each with its rotation of replicas. */
  readonly fronts = new Map<TcpProxy, number>();

  /**
   * Points every front at the live replicas, each starting at another one (its own rotation),
   * so dial-out agents land on different replicas and other replicas relay to them.
   */
  retarget(): void {
    const live = this.replicas.live.map((r) => hostPort(r.url));
    for (const [front, turn] of this.fronts) {
      const k = live.length === 0 ? 0 : turn % live.length;
      front.setTargets([...live.slice(k), ...live.slice(0, k)]);
    }
  }

  #started = 0;
  async startReplica(): Promise<Replica> {
    const r = await this.replicas.start(TASK_TIMEOUTS[this.#started++ % TASK_TIMEOUTS.length]);
    this.retarget();
    return r;
  }

  async killReplica(r: Replica): Promise<void> {
    await this.replicas.kill(r);
    this.retarget();
    // Dead now: whatever running chats it still owns must be taken over by another replica.
    const owned = await this.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM chats WHERE worker_id = $1 AND status IN ('running', 'interrupting')",
      [r.workerId],
    );
    this.stats.failovers += owned.rows[0]?.n ?? 0;
    // Awaited when the scenario's faults end; a replacement that fails to start fails the
    // campaign there (and its cleanup runs), not as an unhandled rejection before.
    const replacement = this.startReplica();
    replacement.catch(() => undefined);
    this.pending.push(replacement);
  }

  async runScenario(seed: number): Promise<Violation[]> {
    const rng = new Rng(seed);
    const dir = path.join(this.workDir, `scenario-${seed}`);
    const agents: WorkspaceAgent[] = [];
    const proxies: FaultProxy[] = [];
    /** The dial-out agents' TCP fronts, by agent index. */
    const fronts = new Map<number, TcpProxy>();
    const workspaces: string[] = [];
    try {
      const t0 = Date.now();
      // The agents start at once (each is a process that loads the CLI).
      const made = await Promise.allSettled(
        Array.from({ length: this.o.agentsPerScenario }, async (_, a) => {
          const name = `agent-${a}`;
          const ws = path.join(dir, name, "ws");
          const dialout = this.o.dialoutEvery > 0 && (a + 1) % this.o.dialoutEvery === 0;
          let agent: WorkspaceAgent;
          let workspace: string | undefined;
          let front: TcpProxy | undefined;
          if (dialout) {
            // A workspace with no URL: its agent dials in with a token the database knows.
            workspace = randomUUID();
            await this.db.query(
              "INSERT INTO workspaces (id, name, agent_url, shared) VALUES ($1, $2, NULL, true)",
              [workspace, `${seed}-${name}`],
            );
            const token = await mintAgentToken(pgQueryable(this.db), workspace);
            front = await startTcpProxy([]);
            this.fronts.set(front, seed + a);
            this.retarget();
            agent = await WorkspaceAgent.start(ws, name, { url: front.url, token });
          } else {
            agent = await WorkspaceAgent.start(ws, name);
          }
          await mkdir(path.join(agent.dir, "markers"), { recursive: true });
          await mkdir(path.join(agent.dir, "writes"), { recursive: true });
          // A dial-out agent's proxy stays unused (it has no URL): per-request faults are for
          // listening agents, per-connection ones (the front) for dial-out agents.
          const proxy = await FaultProxy.start(
            agent.name,
            () => agent.url,
            new Rng(deriveSeed(seed, "proxy", a)),
          );
          if (!dialout) {
            const w = await this.api<{ id: string }>("POST", "/api/v1/workspaces", {
              name: `${seed}-${agent.name}`,
              agent_url: proxy.url,
              agent_token: agent.token,
            });
            workspace = w.id;
          }
          return { agent, proxy, workspace: workspace!, front };
        }),
      );
      // Whatever started is stopped below, also when another one failed to start.
      made.forEach((r, a) => {
        if (r.status === "rejected") return;
        agents.push(r.value.agent);
        proxies.push(r.value.proxy);
        workspaces.push(r.value.workspace);
        if (r.value.front) fronts.set(a, r.value.front);
      });
      for (const r of made) if (r.status === "rejected") throw r.reason;
      this.stats.dialoutAgents += fronts.size;
      const chatPlans: { plan: Plan; agent: number }[] = [];
      for (let j = 0; j < this.o.concurrency; j++) {
        const a = j % agents.length;
        const key = `k${seed.toString(16)}c${j}`;
        const plan = makePlan(new Rng(deriveSeed(seed, "plan", j)), key, agents[a]!.dir);
        await writeFile(plan.editFile, `${ANCHOR}\n`);
        this.plans.set(key, plan);
        chatPlans.push({ plan, agent: a });
      }
      // A fresh agent refuses calls younger than its uptime plus the 2 s age margin
      // (CONTRACT.md 5): start chats once the agents can vouch for them.
      const oldest = Math.max(...agents.map((a) => a.startedAt));
      await sleep(Math.max(0, oldest + 2_500 - Date.now()));

      const probability = rng.pick([0, 0.05, 0.1, 0.2]);
      for (const p of proxies) {
        p.setPolicy({
          probability,
          maxRequestDelayMs: this.o.maxRequestDelayMs,
          maxResponseDelayMs: Math.round(this.o.agentAnswerTimeoutMs * 1.5),
        });
      }
      const chats: { id: string; agent: string }[] = [];
      const interrupted = new Set<string>();
      for (const { plan, agent } of chatPlans) {
        // Titled by its plan: a POST whose answer was lost may have made the chat, and a second
        // chat of one plan would run its commands again, on the same markers.
        const made = async () =>
          (
            await this.api<{ chats: { id: string; title: string }[] }>("GET", "/api/v1/chats")
          ).chats.find((c) => c.title === plan.key);
        const c = await this.api<{ id: string }>(
          "POST",
          "/api/v1/chats",
          {
            workspace_id: workspaces[agent],
            title: plan.key,
            message: `${PLAN_PREFIX}${plan.key}`,
          },
          undefined,
          made,
        );
        chats.push({ id: c.id, agent: agents[agent]!.name });
      }
      this.stats.chats += chats.length;

      // The fault schedule: seeded kinds at seeded moments. The dial-out kinds only when the
      // scenario has a dial-out agent, so scenarios without one draw as they always did.
      const count = rng.int(2, 6);
      const kinds: Record<string, number> = {
        kill_replica: 2,
        restart_agent: 1,
        silence: 1,
        interrupt: 3,
        message_queue: 1,
        message_interrupt: 2,
        ...(fronts.size > 0 && { cut_agent: 2, cut_agent_answer: 2, freeze_agent: 1 }),
      };
      const schedule = Array.from({ length: count }, () => ({
        at: rng.int(0, this.o.faultWindowMs),
        kind: rng.weighted(kinds),
        r: deriveSeed(seed, "fault", rng.int(0, 2 ** 31)),
      }));
      if (fronts.size > 0) {
        // Every scenario with a dial-out agent cuts a connection at least once, on its own
        // seed (the draws above stay those of the scenario's seed).
        const d = new Rng(deriveSeed(seed, "dialout-fault"));
        schedule.push({
          at: d.int(0, this.o.faultWindowMs),
          kind: d.pick(["cut_agent", "cut_agent_answer", "freeze_agent"] as const),
          r: deriveSeed(seed, "dialout-fault", 1),
        });
      }
      // And every scenario kills a replica at least once, inside the first half of the window
      // while its chats still run: a failover is what the campaign exists to test, and turns
      // fast enough could otherwise all end before a seeded kill lands.
      {
        const k = new Rng(deriveSeed(seed, "kill-fault"));
        schedule.push({
          at: k.int(0, Math.floor(this.o.faultWindowMs / 2)),
          kind: "kill_replica",
          r: deriveSeed(seed, "kill-fault", 1),
        });
      }
      schedule.sort((x, y) => x.at - y.at);
      /** This scenario's chats running now, with their owners. */
      const running = async () =>
        (
          await this.db.query<{ id: string; worker_id: string }>(
            "SELECT id, worker_id FROM chats WHERE id = ANY($1::uuid[]) " +
              "AND status IN ('running', 'interrupting')",
            [chats.map((c) => c.id)],
          )
        ).rows;
      /** A running chat when there is one (an interrupt of a waiting chat tests little). */
      const target = async (fr: Rng) => {
        const ids = new Set((await running()).map((row) => row.id));
        const busy = chats.filter((c) => ids.has(c.id));
        return fr.pick(busy.length > 0 ? busy : chats);
      };
      const dialFronts = [...fronts.values()];
      const thaws: Promise<void>[] = [];
      const started = Date.now();
      for (const f of schedule) {
        await sleep(Math.max(0, started + f.at - Date.now()));
        const fr = new Rng(f.r);
        switch (f.kind) {
          case "kill_replica": {
            const live = this.replicas.live;
            if (live.length < 2) break; // keep one replica up
            this.fault(f.kind);
            // A replica that owns a running chat of this scenario when one does: killing an
            // idle one tests a restart, not a takeover.
            const owners = new Set((await running()).map((row) => row.worker_id));
            const owning = live.filter((r) => owners.has(r.workerId));
            await this.killReplica(fr.pick(owning.length > 0 ? owning : live));
            break;
          }
          case "restart_agent":
            this.fault(f.kind);
            await fr.pick(agents).restart(fr.pick(["SIGKILL", "SIGTERM"] as const));
            break;
          case "silence":
            this.fault(f.kind);
            fr.pick(proxies).silence(fr.int(1_000, 4_000));
            break;
          case "cut_agent":
            // The connection drops (both sides at once); the agent dials again, maybe to
            // another replica. Requests in flight on it lose their answers.
            this.fault(f.kind);
            fr.pick(dialFronts).cutAll();
            break;
          case "cut_agent_answer": {
            // The next bytes the agent sends (an answer, most likely) are dropped and the
            // connection cut: the server sent a request whose answer never arrives.
            this.fault(f.kind);
            const cut = fr.pick(dialFronts).cutOnNextAgentBytes();
            cut.catch(() => undefined);
            break;
          }
          case "freeze_agent": {
            // A dead network path: the connection carries nothing, then it is cut.
            this.fault(f.kind);
            const front = fr.pick(dialFronts);
            front.freezeAll();
            const ms = fr.int(500, 4_000);
            thaws.push(sleep(ms).then(() => front.cutAll()));
            break;
          }
          case "interrupt": {
            this.fault(f.kind);
            const c = await target(fr);
            interrupted.add(c.id);
            const r = await this.api<{ status: string }>(
              "POST",
              `/api/v1/chats/${c.id}/interrupt`,
              undefined,
              fr,
            );
            if (r.status === "interrupting") this.stats.interrupts += 1;
            break;
          }
          case "message_queue":
          case "message_interrupt": {
            this.fault(f.kind);
            const c = await target(fr);
            const busy = f.kind === "message_queue" ? "queue" : "interrupt";
            if (busy === "interrupt") interrupted.add(c.id);
            const r = await this.api<{ queued: boolean }>(
              "POST",
              `/api/v1/chats/${c.id}/messages`,
              { text: `continue (${busy})`, busy_behavior: busy },
              fr,
            );
            if (r.queued && busy === "interrupt") this.stats.interrupts += 1;
            break;
          }
        }
      }
      await sleep(Math.max(0, started + this.o.faultWindowMs - Date.now()));
      for (const p of proxies) p.calm();
      await Promise.all(thaws);
      await Promise.all(this.pending.splice(0));

      // Settle: every chat waiting or in error, then left-running processes reach their end.
      const settleBy = Date.now() + this.o.settleMs;
      const statusOf = async () =>
        (
          await this.db.query<{ status: string }>(
            "SELECT status FROM chats WHERE id = ANY($1::uuid[])",
            [chats.map((c) => c.id)],
          )
        ).rows.map((r) => r.status);
      while (Date.now() < settleBy) {
        if ((await statusOf()).every((s) => s === "waiting" || s === "error")) break;
        await sleep(200);
      }
      const settled = Date.now();
      const history = async (): Promise<ScenarioHistory> => ({
        seed,
        chats: await readChats(this.db, chats),
        evidence: new Map(
          await Promise.all(agents.map(async (a) => [a.name, await readEvidence(a.dir)] as const)),
        ),
        proxyLog: proxies.flatMap((p) => p.log),
        agentRestarts: new Map(agents.map((a) => [a.name, a.restarts])),
        agentAnswerTimeoutMs: this.o.agentAnswerTimeoutMs,
        interruptedChats: interrupted,
      });
      const processesBy = Date.now() + MAX_SLEEP_MS + 2_000;
      let h = await history();
      let found = check(h);
      while (found.some((v) => v.rule === "never-killed") && Date.now() < processesBy) {
        await sleep(250);
        h = await history();
        found = check(h);
      }

      this.o.log(
        `  seed=${seed}: agents up in ${started - t0} ms, faults ${this.o.faultWindowMs} ms, ` +
          `settled ${settled - started - this.o.faultWindowMs} ms after them, checked in ${Date.now() - settled} ms`,
      );
      this.fault(
        "proxy_request",
        proxies.reduce((n, p) => n + p.faults, 0),
      );
      const dialoutNames = new Set(agents.filter((a) => a.dialout).map((a) => a.name));
      for (const a of agents) if (a.dialout) this.stats.dialoutConnects += a.connects;
      for (const c of h.chats) {
        if (c.status === "error") this.stats.chatsInError += 1;
        for (const m of c.messages) {
          for (const p of m.content) {
            if (p.type === "tool-call") this.stats.toolCalls += 1;
            if (p.type === "tool-call" && dialoutNames.has(c.agent))
              this.stats.dialoutToolCalls += 1;
            if (p.type === "tool-result") {
              const s = String((p.result as { status?: unknown }).status);
              this.stats.results[s] = (this.stats.results[s] ?? 0) + 1;
            }
          }
        }
      }
      this.stats.scenarios += 1;
      return found;
    } finally {
      await Promise.all(proxies.map((p) => p.close()));
      await Promise.all(agents.map((a) => a.stop()));
      for (const front of fronts.values()) {
        this.fronts.delete(front);
        await front.close();
      }
    }
  }
}

/** The campaign's pg pool as the Queryable the server's own helpers take. */
function pgQueryable(db: pg.Pool): Queryable {
  return {
    async query<R extends Row = Row>(sql: string, params?: readonly unknown[]) {
      const r = await db.query(sql, params as unknown[] | undefined);
      return { rows: r.rows as R[], affectedRows: r.rowCount ?? 0 };
    },
    async exec(sql: string) {
      await db.query(sql);
    },
  };
}

/** Scenario seeds of a campaign: derived from its seed, so each can be replayed alone. */
export function scenarioSeeds(seed: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => deriveSeed(seed, "scenario", i));
}

export async function runCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), "tether-chaos-"));
  const database = await createCampaignDatabase(o.postgresUrl);
  let fake: FakeProvider | undefined;
  let replicas: Replicas | undefined;
  // A pool: the scenario's set-up queries run concurrently (one client would queue them, which
  // pg deprecates).
  const db = new pg.Pool({ connectionString: database.url, max: 4 });
  // Kept unless the campaign ends cleanly: a harness failure needs the replicas' logs too.
  let keep = true;
  try {
    fake = await startFakeProvider();
    replicas = new Replicas({
      postgresUrl: database.url,
      modelBaseUrl: fake.url,
      leaseMs: o.leaseMs,
      heartbeatMs: o.heartbeatMs,
      agentAnswerTimeoutMs: o.agentAnswerTimeoutMs,
      workDir,
    });
    const c = new Campaign(o, replicas, db, workDir);
    fake.respond(planResponder(c.plans));
    // One replica migrates the fresh database before the others start.
    const began = Date.now();
    await c.startReplica();
    await Promise.all(Array.from({ length: o.replicas - 1 }, () => c.startReplica()));
    o.log(`${o.replicas} replicas up in ${Date.now() - began} ms`);
    const first = await c.api<{ token: string }>("POST", "/api/v1/users/first", {
      email: "chaos@example.com",
      password: "chaos campaign password",
    });
    c.token = first.token;

    const seeds = o.scenarioSeeds ?? scenarioSeeds(o.seed, o.scenarios);
    let next = 0;
    let done = 0;
    const lane = async (): Promise<void> => {
      while (next < seeds.length) {
        const seed = seeds[next++]!;
        const t0 = Date.now();
        const found = await c.runScenario(seed);
        c.violations.push(...found);
        o.log(
          `scenario ${++done}/${seeds.length} seed=${seed}: ${found.length} violations ` +
            `in ${Date.now() - t0} ms (faults so far ${c.stats.faults}, tool calls ${c.stats.toolCalls})`,
        );
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, o.parallel ?? 1) }, lane));
    c.fault("attempt_timeout", replicas.attemptTimeouts);
    keep = c.violations.length > 0 || o.keepWorkDir === true;
    return {
      stats: c.stats,
      violations: c.violations,
      ...(keep && { workDir, databaseUrl: database.url }),
    };
  } finally {
    await replicas?.stopAll();
    await killAll();
    await db.end().catch(() => undefined);
    await fake?.close();
    // Kept with the logs when there were violations: the chats' final rows explain them.
    if (keep) o.log(`logs and workspaces in ${workDir}; database ${database.url}`);
    if (!keep)
      await database
        .drop()
        .catch((err: unknown) => o.log(`could not drop ${database.name}: ${String(err)}`));
    if (!keep) await rm(workDir, { recursive: true, force: true });
  }
}
