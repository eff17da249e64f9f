// The agent's dial-out connection: instead of listening, the agent dials the server
// (`GET AGENT_CONNECT_PATH`, an HTTP/1.1 upgrade with its token) and, once the server answers
// 101, serves HTTP/2 on that socket — the server is the HTTP/2 client — with the very handler
// `--listen` serves, so every route, header, body and status of the contract is the same over
// either. It dials again by itself, with bounded, jittered backoff, whenever the connection
// drops or cannot be made. The connection only carries requests: the record store and the
// processes belong to the agent process, so a reconnect changes nothing they decide.

import { randomUUID } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import type { Duplex } from "node:stream";
import {
  AGENT_CONNECT_PATH,
  AGENT_INSTANCE_HEADER,
  AGENT_UPGRADE_PROTOCOL,
  AGENT_UPTIME_HEADER,
  realClock,
  type Clock,
  type Timer,
} from "../contract/index.ts";

/** The first pause before dialling again; it doubles after each failure up to the max. */
export const DIAL_RETRY_MIN_MS = 250;
export const DIAL_RETRY_MAX_MS = 30_000;
/** Each pause is shortened by up to this fraction at random, so agents do not dial in step. */
export const DIAL_JITTER_RATIO = 0.3;
/** A connection that stayed up this long resets the pause to the min when it drops. */
export const DIAL_STABLE_MS = 10_000;
/** Bound on one handshake: TCP (and TLS) connect, then the server's 101. */
export const DIAL_HANDSHAKE_TIMEOUT_MS = 10_000;
/** The agent pings the server this often, and drops a connection whose ping goes unanswered. */
export const DIAL_PING_INTERVAL_MS = 15_000;
export const DIAL_PING_TIMEOUT_MS = 10_000;
/** Streams the server may keep open at once (long `wait=true` reads hold one each). */
export const DIAL_MAX_CONCURRENT_STREAMS = 1_000;
/** Largest refusal body read from the server's handshake answer. */
const MAX_REFUSAL_BYTES = 16 * 1024;

/** What happens to the connection, for the log (never carries the token). */
export type DialEvent =
  | { kind: "connected"; server: string }
  | { kind: "disconnected"; server: string; reason: string }
  /** The server answered the handshake with a refusal (401 token, 409 superseded, 503 busy). */
  | { kind: "refused"; server: string; status: number; code?: string; message: string }
  /** The server could not be reached, or the handshake failed. */
  | { kind: "failed"; server: string; error: string }
  | { kind: "retrying"; server: string; inMs: number };

export interface DialOutOptions {
  /** The server's access URL, `http(s)://host[:port][/prefix]`. */
  serverUrl: string;
  /** The agent token, sent as `Authorization: Bearer` on the handshake only. */
  token: string;
  /** Answers each request that comes over the connection: the agent's Fastify routing. */
  handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /** The agent's uptime now (ms): how long its record store has existed. */
  uptimeMs: () => number;
  /** Measures pauses and ping timeouts; the real clock by default. */
  clock?: Clock;
  /** Backoff bounds (DIAL_RETRY_MIN_MS, DIAL_RETRY_MAX_MS by default). */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Ping interval and timeout (DIAL_PING_INTERVAL_MS; the timeout at most the interval). */
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Uniform in [0, 1): the jitter's randomness; Math.random by default. */
  random?: () => number;
  /** TLS options for an https server (a private CA, say); Node's defaults otherwise. */
  tls?: Pick<https.RequestOptions, "ca" | "rejectUnauthorized" | "servername">;
  onEvent?: (e: DialEvent) => void;
}

export interface DialOut {
  /** True while a connection is up. */
  readonly connected: boolean;
  /** Stops dialling and closes the connection; requests in flight are cut. */
  close(): Promise<void>;
}

type Attempt =
  | { kind: "connected"; session: http2.ServerHttp2Session }
  | { kind: "refused"; status: number; code?: string; message: string }
  | { kind: "failed"; error: string };

/** Starts dialling; it keeps a connection up until `close()`. */
export function dialOut(o: DialOutOptions): DialOut {
  const clock = o.clock ?? realClock;
  const minMs = o.retryMinMs ?? DIAL_RETRY_MIN_MS;
  const maxMs = Math.max(minMs, o.retryMaxMs ?? DIAL_RETRY_MAX_MS);
  const random = o.random ?? Math.random;
  const pingIntervalMs = o.pingIntervalMs ?? DIAL_PING_INTERVAL_MS;
  // A ping is answered within a round trip: a short interval (tests) gets a short timeout too.
  const pingTimeoutMs = o.pingTimeoutMs ?? Math.min(DIAL_PING_TIMEOUT_MS, pingIntervalMs);
  const instance = randomUUID();
  const base = o.serverUrl.replace(/\/+$/, "");
  const url = new URL(base + AGENT_CONNECT_PATH);
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`The server URL must be http or https: ${o.serverUrl}`);
  const server = url.origin;
  const emit = (e: DialEvent) => {
    try {
      o.onEvent?.(e);
    } catch {
      // a log's failure is not the connection's
    }
  };
  const h2 = http2.createServer({
    settings: { maxConcurrentStreams: DIAL_MAX_CONCURRENT_STREAMS },
  });
  h2.on("request", o.handler);

  let closed = false;
  let session: http2.ServerHttp2Session | undefined;
  let pending: http.ClientRequest | undefined;
  let wake: (() => void) | undefined;

  const handshake = (): Promise<Attempt> =>
    new Promise((resolve) => {
      const request = url.protocol === "https:" ? https.request : http.request;
      const req = request(url, {
        method: "GET",
        agent: false,
        headers: {
          connection: "Upgrade",
          upgrade: AGENT_UPGRADE_PROTOCOL,
          authorization: `Bearer ${o.token}`,
          [AGENT_UPTIME_HEADER]: String(Math.max(0, Math.floor(o.uptimeMs()))),
          [AGENT_INSTANCE_HEADER]: instance,
        },
        ...(url.protocol === "https:" && o.tls),
      });
      pending = req;
      const timer = clock.setTimer(DIAL_HANDSHAKE_TIMEOUT_MS, () =>
        req.destroy(new Error(`no answer within ${DIAL_HANDSHAKE_TIMEOUT_MS} ms`)),
      );
      const done = (a: Attempt) => {
        timer.cancel();
        pending = undefined;
        resolve(a);
      };
      req.once("error", (err) => done({ kind: "failed", error: err.message }));
      req.once("response", (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on("data", (c: Buffer) => {
          bytes += c.length;
          if (bytes <= MAX_REFUSAL_BYTES) chunks.push(c);
        });
        res.once("error", () => undefined);
        res.once("close", () => {
          let message = `The server answered ${res.statusCode} instead of upgrading.`;
          let code: string | undefined;
          try {
            const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
              message?: unknown;
              code?: unknown;
            };
            if (typeof body.message === "string") message = body.message;
            if (typeof body.code === "string") code = body.code;
          } catch {
            // not JSON: keep the generic message
          }
          done({ kind: "refused", status: res.statusCode ?? 0, message, ...(code && { code }) });
        });
      });
      req.once("upgrade", (res, socket, head) => {
        if (res.statusCode !== 101 || closed) {
          socket.destroy();
          done({ kind: "failed", error: `unexpected upgrade answer ${res.statusCode}` });
          return;
        }
        done({ kind: "connected", session: serve(socket, head) });
      });
      req.end();
    });

  /** Serves HTTP/2 on the upgraded socket: the server's connection preface may already be in `head`. */
  const serve = (socket: Duplex, head: Buffer): http2.ServerHttp2Session => {
    const s = socket as Duplex & {
      setNoDelay?: (b: boolean) => void;
      setKeepAlive?: (b: boolean, ms: number) => void;
      setTimeout?: (ms: number) => void;
    };
    s.setTimeout?.(0);
    s.setNoDelay?.(true);
    s.setKeepAlive?.(true, pingIntervalMs);
    if (head.length > 0) socket.unshift(head);
    let made: http2.ServerHttp2Session | undefined;
    h2.once("session", (x: http2.ServerHttp2Session) => (made = x));
    h2.emit("connection", socket);
    if (!made) throw new Error("The HTTP/2 server made no session for the connection.");
    return made;
  };

  /** Resolves with why the session ended; pings it meanwhile. */
  const held = (s: http2.ServerHttp2Session): Promise<string> =>
    new Promise((resolve) => {
      let reason = "the connection closed";
      let pingTimer: Timer | undefined;
      let deadline: Timer | undefined;
      const schedule = () => {
        pingTimer = clock.setTimer(pingIntervalMs, () => {
          if (s.destroyed || s.closed) return;
          deadline = clock.setTimer(pingTimeoutMs, () => {
            reason = "the server did not answer a ping";
            s.destroy();
          });
          const sent = s.ping((err) => {
            deadline?.cancel();
            if (!err) schedule();
          });
          if (!sent) deadline.cancel();
        });
      };
      schedule();
      s.once("goaway", (code: number) => (reason = `the server closed the connection (${code})`));
      s.once("error", (err: Error) => (reason = err.message));
      s.once("close", () => {
        pingTimer?.cancel();
        deadline?.cancel();
        resolve(reason);
      });
    });

  const pause = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const t = clock.setTimer(ms, resolve);
      wake = () => {
        t.cancel();
        resolve();
      };
    }).then(() => (wake = undefined));

  const loop = async () => {
    let retryMs = minMs;
    while (!closed) {
      const a = await handshake();
      switch (a.kind) {
        case "connected": {
          if (closed) {
            a.session.destroy();
            return;
          }
          session = a.session;
          const since = clock.now();
          emit({ kind: "connected", server });
          const reason = await held(a.session);
          session = undefined;
          if (closed) return;
          emit({ kind: "disconnected", server, reason });
          retryMs = clock.now() - since >= DIAL_STABLE_MS ? minMs : retryMs;
          break;
        }
        case "refused":
          emit({ ...a, server });
          // A token the server does not know now may be known again (a restored backup), and a
          // newer agent may go away: keep trying, but slowly.
          if (a.status === 401 || a.status === 409) retryMs = maxMs;
          break;
        case "failed":
          emit({ kind: "failed", server, error: a.error });
          break;
        default:
          a satisfies never;
      }
      if (closed) return;
      const inMs = Math.round(retryMs * (1 - DIAL_JITTER_RATIO * random()));
      emit({ kind: "retrying", server, inMs });
      await pause(inMs);
      retryMs = Math.min(retryMs * 2, maxMs);
    }
  };
  const running = loop();

  return {
    get connected() {
      return session !== undefined;
    },
    async close() {
      closed = true;
      wake?.();
      pending?.destroy();
      session?.destroy();
      await running;
    },
  };
}
