// `bin/tether server` as a child process for tests: started in its own process group, its
// stderr (the JSON log) kept for the test to read, and stopped afterwards — gracefully (which
// stops its local agent), else killed with its group, and a local agent it left behind (a
// crash leaves it running, by design) killed too.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { openPglite } from "../../src/chatd/db/pglite.ts";
import { defaultDataDir } from "../../src/cli/server-state.ts";
import { pgliteTemplate, TEST_SHARED_BUFFERS_MB } from "./db.ts";

export const BIN = path.resolve(import.meta.dirname, "../../bin/tether");

export interface ServerProcess {
  proc: ChildProcess;
  url: string;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** The stderr lines that are JSON log lines, parsed. */
  logLines(): Record<string, unknown>[];
}

/**
 * Gives a data dir that has no embedded database yet the migrated one of the run's global setup
 * (test/support/global-setup.ts), so the server's first start skips initdb and the migrations —
 * seconds of CPU — and is otherwise a first start: no user, workspace, model or key. For tests
 * of what happens after the database exists; those of a real first start do not call it.
 */
export async function seedEmbeddedDatabase(dataDir: string): Promise<void> {
  const db = path.join(dataDir, "db");
  if (existsSync(db)) return;
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const seeded = await openPglite({
    dataDir: db,
    loadDataDir: await pgliteTemplate(true),
    sharedBuffersMb: TEST_SHARED_BUFFERS_MB,
  });
  await seeded.close();
}

/**
 * Starts `bin/tether server --listen 127.0.0.1:0 ...args` in `cwd` (with `o.env` as its whole
 * environment, if given) and resolves once it prints its listening line. `cleanup` receives its stop, for the test's afterEach.
 */
export function startServerProcess(
  args: string[],
  cwd: string,
  cleanup: (fn: () => Promise<void>) => void,
  o: {
    /** The server's whole environment (default: the test's). */
    env?: NodeJS.ProcessEnv;
    /** The umask it is started with (default: the test's). */
    umask?: number;
  } = {},
): Promise<ServerProcess> {
  const argv = [BIN, "server", "--listen", "127.0.0.1:0", ...args];
  const [command, commandArgs] =
    o.umask === undefined
      ? [argv[0]!, argv.slice(1)]
      : ["/bin/sh", ["-c", `umask ${o.umask.toString(8)} && exec "$0" "$@"`, ...argv]];
  const proc = spawn(command, commandArgs, {
    cwd,
    ...(o.env && { env: o.env }),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    ...(o.env && { env: o.env }),
  });
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  cleanup(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    }
    try {
      process.kill(-proc.pid!, "SIGKILL");
    } catch {
      // gone
    }
    const i = args.indexOf("--data-dir");
    const dataDir = i >= 0 ? path.resolve(cwd, args[i + 1]!) : defaultDataDir(o.env ?? process.env);
    const agent = await readFile(path.join(dataDir, "local-agent.json"), "utf8")
      .then((t) => (JSON.parse(t) as { pid: number }).pid)
      .catch(() => undefined);
    if (agent !== undefined && alive(agent)) process.kill(agent, "SIGKILL");
  });
  let err = "";
  proc.stderr.on("data", (c: Buffer) => {
    err += c.toString();
    if (process.env.TETHER_TEST_SERVER_LOG) process.stderr.write(c);
  });
  const logLines = () =>
    err.split("\n").flatMap((l) => {
      try {
        return l.startsWith("{") ? [JSON.parse(l) as Record<string, unknown>] : [];
      } catch {
        return [];
      }
    });
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) resolve({ proc, url: m[1]!, stderr: () => err, logLines });
    });
    proc.once("exit", (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

/**
 * A workspace directory beside a test's data dir (`<home>/ws`): the server refuses a data dir
 * inside its workspace, so a test must not serve `home` itself when its data is in `home/data`.
 */
export async function workspaceIn(home: string): Promise<string> {
  const ws = path.join(home, "ws");
  await mkdir(ws, { recursive: true });
  return ws;
}

/**
 * A server in a fresh home of its own (`<tmp>/<prefix>…`, removed afterwards): its data in
 * `<home>/data`, its local workspace `<home>/ws` (written by `prepare` before it starts), on the
 * fake provider at `modelUrl` when given, with `args` after those.
 */
export async function startServerInHome(
  prefix: string,
  cleanup: (fn: () => Promise<void>) => void,
  o: { modelUrl?: string; args?: string[]; prepare?: (ws: string) => Promise<void> } = {},
): Promise<{ server: ServerProcess; home: string; ws: string }> {
  const home = await mkdtemp(path.join(os.tmpdir(), prefix));
  cleanup(() => rm(home, { recursive: true, force: true }));
  const ws = await workspaceIn(home);
  await o.prepare?.(ws);
  await seedEmbeddedDatabase(path.join(home, "data"));
  const model =
    o.modelUrl === undefined
      ? []
      : ["--model", "openai-compatible:fake-model", "--model-base-url", o.modelUrl];
  const server = await startServerProcess(
    ["--data-dir", path.join(home, "data"), "--workspace-dir", ws, ...model, ...(o.args ?? [])],
    home,
    cleanup,
  );
  return { server, home, ws };
}

/** Polls a chat through the API until its status is `status`. */
export async function chatReaches(
  url: string,
  token: string,
  chatId: string,
  status: string,
  timeoutMs = 20_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const now = (await api<{ status: string }>(url, token, "GET", `/api/v1/chats/${chatId}`))
      .status;
    if (now === status) return;
    if (Date.now() > end) throw new Error(`chat ${chatId} is ${now}, not ${status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One JSON request to a server's API; throws on a non-2xx answer. */
export async function api<T>(
  url: string,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(new URL(route, url), {
    method,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** A Prometheus text scrape as `name{labels}` → value (labels exactly as written). */
export function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$/.exec(line);
    if (!m) throw new Error(`Not a sample line: ${line}`);
    const v = m[2]!;
    samples.set(m[1]!, v === "+Inf" ? Infinity : v === "-Inf" ? -Infinity : Number(v));
  }
  return samples;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
