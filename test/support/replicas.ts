// A cluster for replica tests, all real: a fresh Postgres database, the fake model provider,
// one workspace agent (`bin/tether agent`) and any number of `bin/tether server` replicas on
// that database, each its own process group. `close()` stops everything and drops the
// database, even when a test failed.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { migrate } from "../../src/chatd/db/migrate.ts";
import { openPostgres } from "../../src/chatd/db/postgres.ts";
import {
  createSecretBox,
  generateSecretKey,
  parseSecretKey,
  type SecretBox,
} from "../../src/chatd/secrets/index.ts";
import type { Database } from "../../src/chatd/db/types.ts";
import { createScratchDatabase, testDatabaseUrl } from "./db.ts";
import { startFakeProvider, type FakeChatRequest, type FakeProvider } from "./fake-provider.ts";

const BIN = path.resolve(import.meta.dirname, "../../bin/tether");
/** The contract's age margin (CONTRACT.md 5) and a little: a younger agent refuses calls. */
const AGENT_WARM_UP_MS = 2_500;
/** A process that does not print its listening line in this long has failed to start. */
const START_TIMEOUT_MS = 30_000;
/** A stopped process that has not exited in this long is killed. */
const EXIT_TIMEOUT_MS = 15_000;

/** Test-sized failover timings: takeover after a dead owner's lease is seconds, not minutes. */
export const LEASE_MS = 3_000;
export const HEARTBEAT_MS = 500;

interface Proc {
  proc: ChildProcess;
  url: string;
  /** Everything it wrote to stderr (its log), for failure messages. */
  log(): string;
  /** Sends `signal` (SIGKILL to its whole group) and resolves with its exit code. */
  stop(signal: "SIGTERM" | "SIGKILL"): Promise<number | null>;
}

export interface Replica extends Proc {
  /** Its worker ID, as registered in `workers`. */
  workerId: string;
}

/** Starts `bin/tether <args>` in its own process group; resolves on its listening line. */
function startProcess(args: string[], cwd: string): Promise<Proc> {
  const proc = spawn(BIN, args, { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  proc.stderr.on("data", (c: Buffer) => {
    err += c.toString();
    if (process.env.TETHER_TEST_SERVER_LOG) process.stderr.write(c);
  });
  const exited = new Promise<number | null>((resolve) =>
    proc.once("exit", (code) => resolve(code)),
  );
  const stop = async (signal: "SIGTERM" | "SIGKILL"): Promise<number | null> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      try {
        if (signal === "SIGKILL") process.kill(-proc.pid!, "SIGKILL");
        else proc.kill(signal);
      } catch {
        // already gone
      }
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-proc.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }, EXIT_TIMEOUT_MS);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop("SIGKILL");
      reject(new Error(`${args[0]} did not start in ${START_TIMEOUT_MS} ms: ${err}`));
    }, START_TIMEOUT_MS);
    let out = "";
    proc.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1]!, log: () => err, stop });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${args[0]} exited ${code} before listening: ${err}`));
    });
  });
}

export interface ApiMessage {
  id: string;
  role: string;
  parts: {
    type: string;
    text?: string;
    tool_call_id?: string;
    result?: { status: string; [k: string]: unknown };
  }[];
}

export interface Cluster {
  /** The fresh database, for looking at what the replicas wrote. */
  db: Database;
  fake: FakeProvider;
  /** Seals and opens secrets with the replicas' key (the replica secret is stored sealed). */
  secrets: SecretBox;
  /** The workspace agent's directory. */
  dir: string;
  /** Starts `n` replicas at once (extra server flags in `args`); each is stopped by close(). */
  startReplicas(n: number, args?: string[]): Promise<Replica[]>;
  /** A JSON request to a replica's API as the test user; throws unless 2xx. */
  api<T>(r: Replica, method: string, route: string, body?: unknown): Promise<T>;
  /** The test user's token (the first replica a test starts creates the user). */
  token(): string;
  /** A new chat in the agent's workspace with a first message, created through `r`. */
  createChat(r: Replica, message: string): Promise<string>;
  /** The worker that owns the chat now (null: nobody). */
  owner(chatId: string): Promise<string | null>;
  /** Polls until the chat is waiting or in error; answers its status and visible messages. */
  settle(
    r: Replica,
    chatId: string,
    ms?: number,
  ): Promise<{ status: string; messages: ApiMessage[] }>;
  close(): Promise<void>;
}

/** Polls `cond` (real time) until it answers a value other than undefined, null or false. */
export async function waitFor<T>(
  what: string,
  cond: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  ms = 15_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > end) throw new Error(`Timed out after ${ms} ms waiting for ${what}.`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The text of the last user message of a model request. */
export function lastUserText(req: FakeChatRequest): string {
  const m = req.messages.filter((x) => x.role === "user").at(-1);
  return typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? "");
}

/** True when the request carries a tool result (the model is called after a tool batch). */
export function hasToolResult(req: FakeChatRequest): boolean {
  return req.messages.some((m) => m.role === "tool");
}

/** The cluster for a test file; requires TETHER_TEST_DATABASE_URL (the caller skips without). */
export async function startCluster(): Promise<Cluster> {
  const base = testDatabaseUrl();
  if (base === undefined) throw new Error("Replica tests need TETHER_TEST_DATABASE_URL.");
  const cleanups: (() => Promise<unknown>)[] = [];
  const close = async (): Promise<void> => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const scratch = await createScratchDatabase(base, `tether_replicas_${process.pid}`);
    cleanups.push(() => scratch.drop());
    const dbUrl = scratch.url;
    const db = await openPostgres({ url: dbUrl, poolSize: 2 });
    cleanups.push(() => db.close());
    await migrate(db);

    const fake = await startFakeProvider();
    cleanups.push(() => fake.close());
    const home = await mkdtemp(path.join(os.tmpdir(), "tether-replicas-"));
    cleanups.push(() => rm(home, { recursive: true, force: true }));
    const dir = path.join(home, "workspace");
    await mkdir(dir);
    // Every replica of one database seals its secrets with the same key.
    const keyFile = path.join(home, "secret.key");
    const key = generateSecretKey();
    await writeFile(keyFile, key, { mode: 0o600 });
    const secrets = createSecretBox({ current: parseSecretKey(key, "key") });
    const agent = await startProcess(["agent", "--listen", "127.0.0.1:0", "--dir", dir], home);
    cleanups.push(() => agent.stop("SIGTERM"));
    const agentWarmAt = Date.now() + AGENT_WARM_UP_MS;

    let token: string | undefined;
    let workspaceId: string | undefined;
    const replicas: Replica[] = [];
    cleanups.push(() => Promise.all(replicas.map((r) => r.stop("SIGKILL"))));

    const api = async <T>(r: Replica, method: string, route: string, body?: unknown) => {
      const res = await fetch(new URL(route, r.url), {
        method,
        headers: {
          ...(token && { authorization: `Bearer ${token}` }),
          ...(body !== undefined && { "content-type": "application/json" }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${route} on ${r.url}: ${res.status} ${text}`);
      return (text === "" ? {} : JSON.parse(text)) as T;
    };

    const startReplica = async (args: string[]): Promise<Replica> => {
      const data = await mkdtemp(path.join(home, "server-"));
      const p = await startProcess(
        [
          "server",
          "--listen",
          "127.0.0.1:0",
          "--postgres-url",
          dbUrl,
          "--secret-key-file",
          keyFile,
          "--data-dir",
          data,
          "--no-local-workspace",
          "--model",
          "openai-compatible:fake-model",
          "--model-base-url",
          fake.url,
          "--lease-ms",
          String(LEASE_MS),
          "--heartbeat-ms",
          String(HEARTBEAT_MS),
          "--agent-answer-timeout-ms",
          "5000",
          ...args,
        ],
        home,
      );
      const advertised = args.includes("--advertise-url")
        ? args[args.indexOf("--advertise-url") + 1]
        : p.url;
      const r = await db.query<{ id: string }>("SELECT id FROM workers WHERE address = $1", [
        advertised,
      ]);
      const replica = { ...p, workerId: r.rows[0]?.id ?? "" };
      replicas.push(replica);
      if (!replica.workerId) throw new Error(`Replica at ${p.url} is not registered.`);
      return replica;
    };

    return {
      db,
      fake,
      secrets,
      dir,
      async startReplicas(n, args = []) {
        const started = await Promise.all(Array.from({ length: n }, () => startReplica(args)));
        if (token === undefined) {
          const first = started[0]!;
          const user = { email: "replicas@example.com", password: "correct horse battery" };
          const res = await fetch(new URL("/api/v1/users/first", first.url), {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(user),
          });
          token =
            res.status === 201
              ? ((await res.json()) as { token: string }).token
              : (await api<{ token: string }>(first, "POST", "/api/v1/auth/login", user)).token;
          workspaceId = (
            await api<{ id: string }>(first, "POST", "/api/v1/workspaces", {
              name: "replicas",
              agent_url: agent.url,
            })
          ).id;
        }
        return started;
      },
      api,
      token: () => token!,
      async createChat(r, message) {
        await waitFor("the agent to be past its age margin", () => Date.now() >= agentWarmAt);
        return (
          await api<{ id: string }>(r, "POST", "/api/v1/chats", {
            workspace_id: workspaceId,
            message,
          })
        ).id;
      },
      async owner(chatId) {
        const r = await db.query<{ worker_id: string | null }>(
          "SELECT worker_id FROM chats WHERE id = $1",
          [chatId],
        );
        return r.rows[0]?.worker_id ?? null;
      },
      async settle(r, chatId, ms = 30_000) {
        const status = await waitFor(
          `chat ${chatId} to settle`,
          async () => {
            const c = await api<{ status: string }>(r, "GET", `/api/v1/chats/${chatId}`);
            return c.status === "waiting" || c.status === "error" ? c.status : undefined;
          },
          ms,
        );
        const { messages } = await api<{ messages: ApiMessage[] }>(
          r,
          "GET",
          `/api/v1/chats/${chatId}/messages`,
        );
        return { status, messages };
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Every tool result in the messages. */
export function toolResults(
  messages: ApiMessage[],
): NonNullable<ApiMessage["parts"][0]["result"]>[] {
  return messages.flatMap((m) =>
    m.parts.flatMap((p) => (p.type === "tool-result" && p.result ? [p.result] : [])),
  );
}
