// The dial-out transport for tests that speak to one agent, without a database: a front that
// takes the agent's dial-out connection with the server's own handshake code (session.ts), and
// that (1) forwards every plain HTTP/1.1 request it gets onto that connection — repeated
// headers, raw bodies and clients that go away included — so tests written against an agent's
// URL run unchanged over HTTP/2 in reverse, and (2) is the AgentRouter of a DialoutTransport,
// the transport chatd uses, so clients built on it go the production way.

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { dialOut, type DialOut, type DialOutOptions } from "../../src/agent/dialout.ts";
import {
  openAgentSession,
  refuseAgentUpgrade,
  requestOnSession,
  type AgentRoute,
  type AgentRouter,
  type AgentSessionOptions,
} from "../../src/chatd/dialout/index.ts";
import type { Queryable } from "../../src/chatd/db/index.ts";
import { AGENT_CONNECT_PATH } from "../../src/contract/index.ts";
import { mintAgentToken } from "../../src/workspaces/agent-tokens.ts";

/** Headers never forwarded from an HTTP/1.1 request onto HTTP/2. */
const HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "host"]);

export interface DialoutFront extends AgentRouter {
  /** Where the agent dials, and where tests send plain HTTP requests. */
  url: string;
  /** The agent's session now, if connected. */
  session(): http2.ClientHttp2Session | undefined;
  /** Resolves once an agent is connected (a new one when `after` is given: the old closed). */
  connected(after?: http2.ClientHttp2Session): Promise<http2.ClientHttp2Session>;
  /** Cuts the agent's connection (it dials again). */
  cut(): void;
  /** Refuses handshakes with this status until set back to undefined. */
  refuse: number | undefined;
  close(): Promise<void>;
}

export async function startDialoutFront(o: {
  token: string;
  session?: AgentSessionOptions;
}): Promise<DialoutFront> {
  let current: http2.ClientHttp2Session | undefined;
  let waiters: (() => void)[] = [];
  const sockets = new Set<Duplex>();
  const front: Partial<DialoutFront> = { refuse: undefined };

  const server = http.createServer((req, res) => void forward(req, res));
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => undefined);
    if (req.url !== AGENT_CONNECT_PATH) return refuseAgentUpgrade(socket, 404, "nf", "No.");
    if (req.headers.authorization !== `Bearer ${o.token}`)
      return refuseAgentUpgrade(socket, 401, "agent_token_invalid", "Bad token.");
    if (front.refuse !== undefined)
      return refuseAgentUpgrade(socket, front.refuse, "refused", "Refused by the test.");
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    const s = openAgentSession(socket, head, o.session);
    current?.destroy();
    current = s;
    s.once("close", () => {
      if (current === s) current = undefined;
    });
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  });

  const forward = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers: Record<string, string | string[]> = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const n = req.rawHeaders[i]!.toLowerCase();
      if (HOP.has(n)) continue;
      const v = req.rawHeaders[i + 1]!;
      const had = headers[n];
      headers[n] = had === undefined ? v : [...(Array.isArray(had) ? had : [had]), v];
    }
    const gone = new AbortController();
    res.once("close", () => gone.abort());
    const session = current ?? (await front.connected!());
    try {
      const head = await requestOnSession(
        session,
        {
          method: req.method ?? "GET",
          path: req.url ?? "/",
          headers,
          ...(req.method !== "GET" && { body: Buffer.concat(chunks) }),
        },
        gone.signal,
      );
      const out: string[] = [];
      for (let i = 0; i < head.rawHeaders.length; i += 2) {
        if (head.rawHeaders[i] !== "date") out.push(head.rawHeaders[i]!, head.rawHeaders[i + 1]!);
      }
      res.writeHead(head.status, out);
      head.stream.pipe(res);
      head.stream.once("close", () => {
        if (!head.stream.readableEnded) res.destroy();
      });
    } catch {
      res.destroy();
    }
  };

  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return Object.assign(front, {
    url: `http://127.0.0.1:${port}`,
    session: () => current,
    connected(after?: http2.ClientHttp2Session) {
      if (current && current !== after && !current.closed) return Promise.resolve(current);
      return new Promise<http2.ClientHttp2Session>((resolve) =>
        waiters.push(() => resolve(current!)),
      );
    },
    cut() {
      for (const s of sockets) s.destroy();
    },
    async route(): Promise<AgentRoute> {
      return current && !current.closed ? { kind: "local", session: current } : { kind: "none" };
    },
    changed(_ws: string, signal: AbortSignal) {
      return new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, 50);
        waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
        signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(signal.reason as Error);
        });
      });
    },
    async close() {
      current?.destroy();
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  }) as DialoutFront;
}

/** Dials `front` as an agent with test-sized backoff; resolves once connected. */
export async function dialFront(
  front: DialoutFront,
  o: Omit<DialOutOptions, "serverUrl" | "retryMinMs" | "retryMaxMs"> &
    Partial<Pick<DialOutOptions, "retryMinMs" | "retryMaxMs">>,
): Promise<DialOut> {
  const connected = front.connected();
  const d = dialOut({ retryMinMs: 20, retryMaxMs: 200, ...o, serverUrl: front.url });
  await connected;
  return d;
}

// ---- dial-out agents against real servers -------------------------------------------------

const BIN = new URL("../../bin/tether", import.meta.url).pathname;

/** A dial-out workspace row (no agent URL, shared: any user's chats may use it) and a token. */
export async function registerDialoutWorkspace(
  db: Queryable,
  name = "dial-out",
): Promise<{ workspaceId: string; token: string }> {
  const workspaceId = randomUUID();
  await db.query(
    "INSERT INTO workspaces (id, name, agent_url, shared) VALUES ($1, $2, NULL, true)",
    [workspaceId, name],
  );
  return { workspaceId, token: await mintAgentToken(db, workspaceId) };
}

export interface AgentProcess {
  proc: ChildProcess;
  /** How many times it printed `connected to …` so far. */
  connects(): number;
  /** Its stderr (JSON log lines). */
  log(): string;
  /** Resolves once it has connected `n` times in all. */
  connected(n?: number, ms?: number): Promise<void>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `bin/tether agent --server <server> --dir <dir>` with the token in TETHER_AGENT_TOKEN and
 * test-sized reconnect pauses (`env` added to the test's environment: a HOME of its own, say);
 * `cleanup` gets its stop.
 */
export function startAgentProcess(
  o: { server: string; dir: string; token?: string; args?: string[]; env?: NodeJS.ProcessEnv },
  cleanup: (fn: () => Promise<unknown>) => void,
): AgentProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, ...o.env };
  delete env.TETHER_AGENT_TOKEN;
  if (o.token !== undefined) env.TETHER_AGENT_TOKEN = o.token;
  const proc = spawn(
    BIN,
    [
      "agent",
      "--server",
      o.server,
      "--dir",
      o.dir,
      "--reconnect-min-ms",
      "50",
      "--reconnect-max-ms",
      "300",
      ...(o.args ?? []),
    ],
    { env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
  proc.stderr.on("data", (c: Buffer) => {
    err += c.toString();
    if (process.env.TETHER_TEST_SERVER_LOG) process.stderr.write(c);
  });
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const connects = () => out.split("\n").filter((l) => l.startsWith("connected to ")).length;
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    return exited;
  };
  cleanup(() => stop("SIGKILL"));
  return {
    proc,
    connects,
    log: () => err,
    async connected(n = 1, ms = 15_000) {
      const end = Date.now() + ms;
      while (connects() < n) {
        if (proc.exitCode !== null) throw new Error(`agent exited ${proc.exitCode}: ${err}`);
        if (Date.now() > end) throw new Error(`agent did not connect ${n} times: ${err}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    stop,
  };
}
