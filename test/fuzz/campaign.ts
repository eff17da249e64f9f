// The fuzz campaign (issue 11): a real workspace agent and a real server on loopback, seeded
// requests generated from the contract's routes and the server's OpenAPI document and
// mutated, and hostile chats — checked after every request and at the end:
// - no 5xx but the documented ones (the agent's recorded spawn failure; the server's 502
//   agent_* and 503 unavailable), and an answer to every well-framed request;
// - both processes alive and answering, their RSS under a bound;
// - no process started, file written or record created by a refused request (the markers its
//   side effect would leave; a cancel of its tool call answering "never started");
// - a request with an Origin, or a JSON body of another type, is refused by the agent;
// - no secret (tokens, the model key, passwords, the secret key) in any answer or log line;
// - every chat ends `waiting` or `error` within a bound.

import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { escapeToolCallId } from "../../src/contract/index.ts";
import { deriveSeed, Rng } from "../chaos/rng.ts";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { agentCase, type AgentCase, type Lane } from "./agent-requests.ts";
import { chatMessage, hostileStep } from "./chats.ts";
import { seededUuid } from "./mutate.ts";
import { startProc, stopAll, type Proc } from "./procs.ts";
import { send, type Outcome, type WireAnswer } from "./send.ts";
import {
  operations,
  serverCase,
  type Operation,
  type ServerCase,
  type ServerPool,
} from "./server-requests.ts";

export interface CampaignOptions {
  seed: number;
  requests: number;
  chats: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** Chats running at once. */
  chatConcurrency: number;
  /** Replay only these request indexes (and no chats unless onlyChats). */
  only?: number[];
  onlyChats?: number[];
  /** How long a chat may take to end `waiting` or `error`. */
  chatBoundMs: number;
  /** Bound on each process's resident memory. */
  rssLimitBytes: number;
  requestTimeoutMs: number;
  /** A health check (alive, answering, memory) every this many requests. */
  checkEvery: number;
  keep?: boolean;
  progress?: (line: string) => void;
  /** Stops sending (and starting chats) early; the end checks still run. */
  stop?: AbortSignal;
}

export const DEFAULTS: Omit<CampaignOptions, "seed" | "requests" | "chats"> = {
  concurrency: 6,
  chatConcurrency: 3,
  chatBoundMs: 120_000,
  rssLimitBytes: 1536 * 1024 * 1024,
  requestTimeoutMs: 30_000,
  checkEvery: 250,
};

export interface Violation {
  kind: string;
  /** The request index (replay with --only) or chat number (--only-chat). */
  index?: number;
  chat?: number;
  detail: string;
  route?: string;
  mutations?: string[];
}

export interface CampaignResult {
  requests: number;
  chats: number;
  violations: Violation[];
  wallMs: number;
  maxRss: Record<string, number>;
  /** Counts by what happened (`agent 2xx`, `chat error`, `probe`, `effects`...), for a reader. */
  stats: Record<string, number>;
  /** Stopped early (by `stop`). */
  stopped: boolean;
  dir: string;
}

const AGENT_ALLOWED_5XX = new Set(["Failed to start process."]);
const SERVER_ALLOWED_5XX = new Set([
  "agent_unreachable",
  "agent_error",
  "agent_answer_too_large",
  "unavailable",
]);
const RUN_AGE = "coder-tool-call-run-age-ms";

function jsonOf(a: WireAnswer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(a.body.toString("utf8"));
    return v !== null && typeof v === "object" ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export async function runCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const started = Date.now();
  const root = await mkdtemp(path.join(os.tmpdir(), "tether-fuzz-"));
  const ws = path.join(root, "a", "ws");
  const home = path.join(root, "home");
  const srv = path.join(root, "srv");
  for (const d of [path.join(ws, "fz"), home, srv]) await mkdir(d, { recursive: true });
  await writeFile(path.join(ws, "edit.txt"), "AAA\nline one\nline two\n");
  const violations: Violation[] = [];
  const violate = (v: Violation) => {
    violations.push(v);
    o.progress?.(`violation ${formatViolation(v, o.seed)}`);
  };
  const secret = (what: string) => `${what}-${randomBytes(12).toString("hex")}`;
  const agentToken = secret("agenttok");
  const modelKey = secret("modelkey");
  const passwords = {
    owner: secret("pw-owner"),
    admin: secret("pw-admin"),
    member: secret("pw-member"),
  };
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_DATA_HOME: path.join(home, ".local/share"),
    XDG_CONFIG_HOME: path.join(home, ".config"),
    LANG: "C.UTF-8",
    TZ: "UTC",
  };
  let fake: FakeProvider | undefined;
  const procs: Proc[] = [];
  const maxRss: Record<string, number> = {};
  const stats: Record<string, number> = {};
  const count = (k: string) => (stats[k] = (stats[k] ?? 0) + 1);
  try {
    fake = await startFakeProvider();
    fake.respond((req) => hostileStep(o.seed, ws, req) ?? { text: "OK" });
    const agent = await startProc("agent", ["agent", "--listen", "127.0.0.1:0", "--dir", ws], {
      cwd: ws,
      env: { ...env, TETHER_AGENT_TOKEN: agentToken },
      logFile: path.join(root, "agent.log"),
    });
    procs.push(agent);
    const server = await startProc(
      "server",
      [
        "server",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        path.join(root, "data"),
        "--no-local-workspace",
        // A fuzz-made model may point nowhere: its chats retry, then end in `error` well
        // within the campaign's bound on chats (the default limit is 10 minutes).
        "--retry-limit-ms",
        String(Math.floor(o.chatBoundMs / 4)),
      ],
      { cwd: srv, env, timeoutMs: 120_000, logFile: path.join(root, "server.log") },
    );
    procs.push(server);

    // ---- setup: an owner, the model, the workspace, two fuzz identities, sandbox resources ----
    const call = async <T = Record<string, unknown>>(
      token: string | undefined,
      method: string,
      route: string,
      body?: unknown,
    ): Promise<T> => {
      const res = await fetch(new URL(route, server.url), {
        method,
        headers: {
          ...(token && { authorization: `Bearer ${token}` }),
          ...(body !== undefined && { "content-type": "application/json" }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`setup ${method} ${route}: ${res.status} ${text}`);
      return (text ? JSON.parse(text) : {}) as T;
    };
    const owner = (
      await call<{ token: string }>(undefined, "POST", "/api/v1/users/first", {
        email: "owner@example.test",
        password: passwords.owner,
      })
    ).token;
    const model = await call<{ id: string }>(owner, "POST", "/api/v1/models", {
      provider: "openai-compatible",
      model: "fake-model",
      base_url: fake.url,
      api_key: modelKey,
    });
    const workspace = await call<{ id: string }>(owner, "POST", "/api/v1/workspaces", {
      name: "fuzz",
      agent_url: agent.url,
      agent_token: agentToken,
    });
    const users: Record<"admin" | "member", { id: string; email: string; token: string }> =
      {} as never;
    for (const role of ["admin", "member"] as const) {
      const email = `${role}@example.test`;
      const u = await call<{ id: string }>(owner, "POST", "/api/v1/users", {
        email,
        password: passwords[role],
        role,
      });
      users[role] = { id: u.id, email, token: "" };
    }
    const refresh = async (role: "admin" | "member") => {
      await call(owner, "PATCH", `/api/v1/users/${users[role].id}`, { disabled: false }).catch(
        () => undefined,
      );
      const s = await call<{ token: string }>(undefined, "POST", "/api/v1/auth/login", {
        email: users[role].email,
        password: passwords[role],
      });
      users[role].token = (
        await call<{ token: string }>(s.token, "POST", "/api/v1/tokens", { name: "fuzz" })
      ).token;
    };
    await refresh("admin");
    await refresh("member");
    const sandboxWs = await call<{ id: string }>(users.admin.token, "POST", "/api/v1/workspaces", {
      name: "sandbox",
      agent_url: agent.url,
      agent_token: agentToken,
      shared: true,
    }).catch(() =>
      call<{ id: string }>(users.admin.token, "POST", "/api/v1/workspaces", {
        name: "sandbox",
        agent_url: agent.url,
        agent_token: agentToken,
      }),
    );
    const sandboxModel = await call<{ id: string }>(users.admin.token, "POST", "/api/v1/models", {
      provider: "openai-compatible",
      model: "sandbox",
      base_url: fake.url,
      api_key: modelKey,
    });
    const sandboxChat = await call<{ id: string }>(users.admin.token, "POST", "/api/v1/chats", {
      workspace_id: sandboxWs.id,
      model_id: sandboxModel.id,
      title: "sandbox",
    });
    const secretKey = (
      await readFile(path.join(root, "data", "secret.key"), "utf8").catch(() => "")
    ).trim();
    const secrets = () =>
      [
        agentToken,
        modelKey,
        owner,
        users.admin.token,
        users.member.token,
        ...Object.values(passwords),
        ...(secretKey ? [secretKey] : []),
      ].filter((s) => s.length >= 16);
    const pool: ServerPool = {
      ids: [sandboxWs.id, sandboxModel.id, sandboxChat.id, users.member.id],
      identities: [],
    };
    const identities = () => [
      { name: "admin", token: users.admin.token },
      { name: "admin", token: users.admin.token },
      { name: "member", token: users.member.token },
      { name: "owner", token: owner },
      { name: "none", token: "" },
      { name: "garbage", token: `tether_${"0".repeat(40)}` },
    ];
    pool.identities = identities();
    const ops: Operation[] = operations(await call(undefined, "GET", "/api/v1/openapi.json"));
    // Past the contract's 2 s age margin, so a fresh call of age 0 runs.
    await new Promise((r) => setTimeout(r, 2_500));

    const leak = (where: string, text: string) => secrets().find((s) => text.includes(s)) && where;
    const checkSecrets = (a: WireAnswer): string | undefined => {
      const text = a.body.toString("latin1") + JSON.stringify(a.headers);
      const s = secrets().find((x) => text.includes(x));
      return s === undefined
        ? undefined
        : `answer holds a secret (${s.slice(0, s.indexOf("-") + 1) || "token"}…)`;
    };

    // ---- health: alive, answering, memory bounded; fuzz identities repaired -----------
    const health = async (label: string) => {
      for (const p of procs) {
        if (!p.alive()) {
          violate({
            kind: "process",
            detail: `${p.name} died (${label}): ${p.lines.slice(-5).join(" | ")}`,
          });
          throw new Error(`${p.name} died`);
        }
        const rss = p.rss() ?? 0;
        maxRss[p.name] = Math.max(maxRss[p.name] ?? 0, rss);
        if (rss > o.rssLimitBytes)
          violate({
            kind: "memory",
            detail: `${p.name} RSS ${Math.round(rss / 2 ** 20)} MiB > ${Math.round(o.rssLimitBytes / 2 ** 20)} MiB (${label})`,
          });
      }
      const info = await send(
        agent.url,
        { method: "GET", path: "/api/v0/info", headers: { authorization: `Bearer ${agentToken}` } },
        20_000,
      );
      if (info.kind !== "answer" || info.answer.status !== 200)
        violate({
          kind: "process",
          detail: `agent does not answer /info (${label}): ${describe(info)}`,
        });
      const ok = await send(
        server.url,
        { method: "GET", path: "/api/v1/health", headers: {} },
        20_000,
      );
      if (ok.kind !== "answer" || ok.answer.status !== 200)
        violate({
          kind: "process",
          detail: `server does not answer /health (${label}): ${describe(ok)}`,
        });
      for (const role of ["admin", "member"] as const) {
        const me = await send(
          server.url,
          {
            method: "GET",
            path: "/api/v1/me",
            headers: { authorization: `Bearer ${users[role].token}` },
          },
          20_000,
        );
        if (me.kind === "answer" && me.answer.status !== 200)
          await refresh(role).catch(() => undefined);
      }
      pool.identities = identities();
      if (fake) {
        fake.requests.length = 0;
        fake.authorizations.length = 0;
      }
    };

    // ---- requests ------------------------------------------------------------------------
    const refusedMarkers = new Map<string, number>();
    const indexes = o.only ?? Array.from({ length: o.requests }, (_, i) => i);
    let next = 0;
    let sent = 0;
    const lanes: Lane[] = Array.from({ length: Math.max(1, o.concurrency) }, (_, i) => ({
      chatId: seededUuid(new Rng(deriveSeed(o.seed, "lane", i))),
      message: 0,
      processes: [],
    }));

    const agentRequest = async (rng: Rng, index: number, lane: Lane) => {
      const c: AgentCase = agentCase(rng, index, lane, { token: agentToken, dir: ws });
      const out = await send(agent.url, c.wire, o.requestTimeoutMs);
      count(
        out.kind === "answer" ? `agent ${Math.floor(out.answer.status / 100)}xx` : "agent none",
      );
      const v = (detail: string) =>
        violate({ kind: "agent", index, detail, route: c.route, mutations: c.mutations });
      if (out.kind === "none") {
        if (!out.expected && !c.wire.raw) v(`no answer: ${out.error}`);
        return;
      }
      const a = out.answer;
      const body = jsonOf(a);
      if (a.status >= 500 && !(a.status === 500 && AGENT_ALLOWED_5XX.has(String(body?.message))))
        v(`${a.status} ${a.body.toString("utf8").slice(0, 300)}`);
      const leaked = checkSecrets(a);
      if (leaked) v(leaked);
      if (c.origin && a.status < 400) v(`a request with an Origin header was served (${a.status})`);
      if (c.wrongType && a.status < 400)
        v(
          `a JSON route served a ${JSON.stringify(c.wire.headers["content-type"])} body (${a.status})`,
        );
      if (c.route === "start" && a.status === 200 && typeof body?.id === "string") {
        lane.processes.push(body.id);
        if (lane.processes.length > 20) lane.processes.shift();
      }
      // The same tool call sent again — identical, or with its ID's raw UTF-8 bytes instead of
      // the %-escapes (CONTRACT.md 2: the same record) — replays the one answer, never runs twice.
      if (c.toolCall && a.status < 300 && c.marker && rng.chance(0.3)) {
        count("replays");
        const raw = Buffer.from(c.toolCall.id, "utf8").toString("latin1");
        const again = await send(
          agent.url,
          {
            ...c.wire,
            headers: { ...c.wire.headers, ...(rng.chance(0.7) && { "coder-tool-call-id": raw }) },
          },
          o.requestTimeoutMs,
        );
        if (
          again.kind !== "answer" ||
          again.answer.status !== a.status ||
          !again.answer.body.equals(a.body)
        ) {
          v(
            `a repeat of the tool call answered differently: ${describe(again)} (first ${a.status} ${a.body.toString("utf8").slice(0, 100)})`,
          );
        }
      }
      const recorded = a.headers[RUN_AGE] !== undefined;
      if (a.status >= 400 && !recorded && c.marker) {
        refusedMarkers.set(c.marker, index);
        count("refused with an effect marker");
      }
      // A refused tool call created no record: its cancel finds none ("never started").
      if (c.toolCall && a.status >= 400 && !recorded && c.route !== "cancel" && rng.chance(0.5)) {
        const { chatId, messageId, id } = c.toolCall;
        const { toolCallUuid, parseChatId, toMessageId } =
          await import("../../src/contract/index.ts");
        const uuid = toolCallUuid(parseChatId(chatId)!, toMessageId(messageId)!, id);
        count("record probes");
        const probe = await send(
          agent.url,
          {
            method: "POST",
            path: `/api/v0/tool-calls/${uuid}/cancel`,
            headers: {
              authorization: `Bearer ${agentToken}`,
              "content-type": "application/json",
              "coder-chat-id": chatId,
              "coder-tool-call-message-id": String(messageId),
              "coder-tool-call-id": escapeToolCallId(id),
              "coder-tool-call-age-ms": "0",
            },
            body: Buffer.from('{"stop_if_run_age_below_ms":0}'),
          },
          o.requestTimeoutMs,
        );
        if (
          probe.kind === "answer" &&
          probe.answer.status === 200 &&
          jsonOf(probe.answer)?.started === true
        ) {
          v(
            `refused with ${a.status}, yet its tool call has a record (cancel answered started: true)`,
          );
        }
      }
    };

    const serverRequest = async (rng: Rng, index: number) => {
      const c: ServerCase = serverCase(rng, index, ops, pool);
      const out = await send(server.url, c.wire, o.requestTimeoutMs);
      count(
        out.kind === "answer" ? `server ${Math.floor(out.answer.status / 100)}xx` : "server none",
      );
      const v = (detail: string) =>
        violate({ kind: "server", index, detail, route: c.route, mutations: c.mutations });
      if (out.kind === "none") {
        if (!out.expected && !c.wire.raw) v(`no answer: ${out.error}`);
        return;
      }
      const a = out.answer;
      const body = jsonOf(a);
      if (a.status >= 500 && !SERVER_ALLOWED_5XX.has(String(body?.code)))
        v(`${a.status} ${a.body.toString("utf8").slice(0, 300)}`);
      const leaked = checkSecrets(a);
      if (leaked) v(leaked);
    };

    const requestLane = async (lane: Lane) => {
      for (;;) {
        if (o.stop?.aborted) return;
        const at = next++;
        if (at >= indexes.length) return;
        const index = indexes[at]!;
        const rng = new Rng(deriveSeed(o.seed, "request", index));
        lane.message = index; // rises in each lane, as a chat's message IDs do
        if (rng.chance(0.55)) await agentRequest(rng, index, lane);
        else await serverRequest(rng, index);
        sent++;
        if (sent % o.checkEvery === 0) {
          await health(`after ${sent} requests`);
          o.progress?.(`${sent} requests, ${violations.length} violations`);
        }
      }
    };

    // ---- chats -----------------------------------------------------------------------------
    const chatList = o.onlyChats ?? (o.only ? [] : Array.from({ length: o.chats }, (_, k) => k));
    let nextChat = 0;
    let chatsDone = 0;
    const runChat = async (k: number) => {
      const rng = new Rng(deriveSeed(o.seed, "chatplan", k));
      const v = (detail: string) => violate({ kind: "chat", chat: k, detail });
      let id: string;
      try {
        id = (
          await call<{ id: string }>(owner, "POST", "/api/v1/chats", {
            workspace_id: workspace.id,
            model_id: model.id,
            message: chatMessage(k),
          })
        ).id;
      } catch (err) {
        v(`could not start: ${String(err)}`);
        return;
      }
      if (rng.chance(0.3)) {
        await new Promise((r) => setTimeout(r, rng.int(0, 1500)));
        await call(owner, "POST", `/api/v1/chats/${id}/interrupt`).catch((err: unknown) => {
          if (!/ 409 /.test(String(err))) v(`interrupt failed: ${String(err)}`);
        });
      }
      if (rng.chance(0.15)) {
        await call(owner, "POST", `/api/v1/chats/${id}/messages`, {
          text: `${chatMessage(k)} again`,
          busy_behavior: rng.pick(["queue", "interrupt"]),
        }).catch((err: unknown) => v(`second message failed: ${String(err)}`));
      }
      const end = Date.now() + o.chatBoundMs;
      let status = "";
      for (;;) {
        const c = await call<{ status: string; last_error?: string }>(
          owner,
          "GET",
          `/api/v1/chats/${id}`,
        ).catch(() => ({ status: "?" }));
        status = c.status;
        const queue: { messages?: unknown[] } = await call<{ messages?: unknown[] }>(
          owner,
          "GET",
          `/api/v1/chats/${id}/queue`,
        ).catch(() => ({}));
        const queued = (queue.messages ?? []).length;
        // `error` is an end (its queued messages wait for the next message); `waiting` with
        // messages queued is not: they are about to run.
        if (status === "error" || (status === "waiting" && queued === 0)) break;
        if (Date.now() > end) {
          v(`still ${status} after ${o.chatBoundMs} ms`);
          break;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      count(`chat ${status}`);
      const msgs = await fetch(new URL(`/api/v1/chats/${id}/messages`, server.url), {
        headers: { authorization: `Bearer ${owner}` },
      });
      const text = await msgs.text();
      if (msgs.status >= 500) v(`messages answer ${msgs.status}: ${text.slice(0, 200)}`);
      const s = secrets().find((x) => text.includes(x));
      if (s) v("a chat's messages hold a secret");
      chatsDone++;
      if (chatsDone % 50 === 0) o.progress?.(`${chatsDone} chats`);
    };
    const chatLane = async () => {
      for (;;) {
        if (o.stop?.aborted) return;
        const at = nextChat++;
        if (at >= chatList.length) return;
        await runChat(chatList[at]!);
      }
    };

    await Promise.all([
      ...lanes.map((l) => requestLane(l)),
      ...Array.from({ length: Math.max(1, o.chatConcurrency) }, () => chatLane()),
    ]);
    await health("at the end");

    // ---- the end: effects of refused requests, chats of the fuzz identities, logs ---------
    const effects: string[] = [];
    const readAll = async (dir: string): Promise<void> => {
      for (const e of await readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await readAll(p);
        else if (e.isFile()) effects.push((await readFile(p)).toString("latin1"));
      }
    };
    await readAll(ws);
    const allEffects = effects.join("\n");
    const runs = await readFile(path.join(ws, "runs.log"), "latin1").catch(() => "");
    const seen = new Set<string>();
    for (const m of runs.matchAll(/FZ-(\d+)-ZF/g)) {
      if (seen.has(m[0]))
        violate({
          kind: "effect",
          index: Number(m[1]),
          detail: `a start ran twice (${m[0]} twice in runs.log)`,
        });
      seen.add(m[0]);
    }
    for (const m of allEffects.matchAll(/FZ-(\d+)-ZF/g)) {
      count("effects seen");
      const index = refusedMarkers.get(m[0]);
      if (index !== undefined) {
        violate({
          kind: "effect",
          index,
          detail: `a refused request's side effect happened (${m[0]} in the workspace)`,
        });
        refusedMarkers.delete(m[0]);
      }
    }
    for (const role of ["admin", "member"] as const) {
      const list = await call<{ chats: { id: string; status: string }[] }>(
        users[role].token,
        "GET",
        "/api/v1/chats",
      ).catch(() => ({ chats: [] }));
      const end = Date.now() + o.chatBoundMs;
      for (const c of list.chats) {
        let status = c.status;
        let retrying: unknown = null;
        while (status !== "waiting" && status !== "error" && Date.now() < end) {
          await new Promise((r) => setTimeout(r, 500));
          const now = await call<{ status: string; retrying?: unknown }>(
            users[role].token,
            "GET",
            `/api/v1/chats/${c.id}`,
          ).catch(() => ({ status: "?", retrying: null }));
          status = now.status;
          retrying = now.retrying ?? null;
        }
        if (status !== "waiting" && status !== "error")
          violate({
            kind: "chat",
            detail: `${role}'s fuzz chat ${c.id} still ${status}${retrying !== null ? ` (retrying: ${JSON.stringify(retrying)})` : ""}`,
          });
      }
    }
    for (const p of procs) {
      for (const line of p.lines) {
        if (leak(p.name, line)) {
          violate({
            kind: "secret",
            detail: `${p.name} logged a secret: ${line.slice(0, 200).replace(/[a-z]+-[0-9a-f]{24}/g, "<secret>")}`,
          });
          break;
        }
      }
    }
    return {
      requests: sent,
      chats: chatsDone,
      violations,
      wallMs: Date.now() - started,
      maxRss,
      stats,
      stopped: o.stop?.aborted ?? false,
      dir: root,
    };
  } finally {
    for (const p of procs.reverse()) await p.stop();
    await stopAll();
    await fake?.close();
    if (!o.keep && violations.length === 0) await rm(root, { recursive: true, force: true });
  }
}

function describe(o: Outcome): string {
  return o.kind === "answer"
    ? `${o.answer.status} ${o.answer.body.toString("utf8").slice(0, 200)}`
    : o.error;
}

export function formatViolation(v: Violation, seed: number): string {
  const where =
    v.index !== undefined
      ? ` index=${v.index} (--seed ${seed} --only ${v.index})`
      : v.chat !== undefined
        ? ` chat=${v.chat} (--seed ${seed} --only-chat ${v.chat})`
        : "";
  const route = v.route ? ` ${v.route}` : "";
  const muts = v.mutations?.length ? ` [${v.mutations.join(", ")}]` : "";
  return `${v.kind}${where}${route}${muts}: ${v.detail}`;
}
