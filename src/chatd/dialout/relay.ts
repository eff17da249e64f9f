// Any replica drives any dial-out agent: a request for an agent held by another replica goes to
// that replica's internal route `POST /internal/v1/agents/{workspace_id}/exchange` (replica
// secret), which sends it on its session and streams the answer back. The request travels in
// the body (bytes) and three headers (method, path, and its own headers, stamped by the caller
// when its connection to the holder is ready); the holder adds the time it spent before the
// request went onto the session to the tool call's age, so the agent sees an age no younger
// than the real one, but for the one-way transit between replicas. A holder that does not hold
// the agent answers so before sending anything, and the caller looks in the registry again.

import http from "node:http";
import https from "node:https";
import type http2 from "node:http2";
import {
  AGE_HEADER,
  AgentAnswerTooLargeError,
  AgentConnectionError,
  MAX_AGE_MS,
  MAX_AGENT_ANSWER_BYTES,
  realClock,
  type AgentAnswer,
  type AgentRequest,
  type Clock,
} from "../../contract/index.ts";
import { REPLICA_SECRET_HEADER } from "../replicas.ts";
import { answerOf, requestOnSession } from "./session.ts";
import type { AgentRelay } from "./transport.ts";

/** The holder's internal route for one workspace's agent. */
export const agentExchangeRoute = (workspaceId: string): string =>
  `/internal/v1/agents/${workspaceId}/exchange`;

/** Largest request the route takes: a write-file body and its headers. */
export const AGENT_RELAY_BODY_LIMIT_BYTES = 65 * 1024 * 1024;
/** A holder that does not accept the connection in this long counts as unreachable (look again). */
export const AGENT_RELAY_CONNECT_TIMEOUT_MS = 5_000;

/** Headers of the relayed request and answer (values base64url JSON where noted). */
export const RELAY_METHOD_HEADER = "x-tether-agent-method";
export const RELAY_PATH_HEADER = "x-tether-agent-path";
/** The request's headers (`{name: value}`), or the answer's (`[name, value, …]`), base64url JSON. */
export const RELAY_HEADERS_HEADER = "x-tether-agent-headers";
export const RELAY_STATUS_HEADER = "x-tether-agent-status";

/** Codes of the route's own answers (not the agent's). */
export const RELAY_CODES = {
  /** 409: this replica holds no connection of the agent; nothing was sent. */
  notHere: "agent_not_here",
  /** 502: the agent's connection failed after the request went out. */
  lost: "agent_connection_lost",
} as const;

const encode = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString("base64url");
const decode = (s: string): unknown => JSON.parse(Buffer.from(s, "base64url").toString("utf8"));

export interface RelayClientOptions {
  /** The replica secret. */
  secret: string;
  clock?: Clock;
  maxAnswerBytes?: number;
  connectTimeoutMs?: number;
}

/** The caller's side: one keep-alive pool to every holder. */
export class RelayClient implements AgentRelay {
  readonly #o: RelayClientOptions;
  readonly #clock: Clock;
  readonly #http = new http.Agent({ keepAlive: true });
  readonly #https = new https.Agent({ keepAlive: true });

  constructor(o: RelayClientOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
  }

  close(): void {
    this.#http.destroy();
    this.#https.destroy();
  }

  exchange(
    route: { workerId: string; address: string },
    workspaceId: string,
    req: AgentRequest,
    began: number,
    signal: AbortSignal,
  ): Promise<{ kind: "answer"; answer: AgentAnswer } | { kind: "moved" }> {
    if (signal.aborted) return Promise.resolve({ kind: "moved" });
    const url = new URL(route.address.replace(/\/+$/, "") + agentExchangeRoute(workspaceId));
    const tls = url.protocol === "https:";
    const body = req.body ?? Buffer.alloc(0);
    const max = this.#o.maxAnswerBytes ?? MAX_AGENT_ANSWER_BYTES;
    return new Promise((resolve, reject) => {
      const r = (tls ? https : http).request({
        host: url.hostname,
        port: url.port || (tls ? 443 : 80),
        method: "POST",
        path: url.pathname,
        agent: tls ? this.#https : this.#http,
        headers: {
          [REPLICA_SECRET_HEADER]: this.#o.secret,
          [RELAY_METHOD_HEADER]: req.method,
          [RELAY_PATH_HEADER]: encodeURI(req.path),
          "content-type": "application/octet-stream",
          "content-length": String(body.length),
        },
      });
      let sent = false;
      let settled = false;
      const settle = (f: () => void) => {
        if (settled) return;
        settled = true;
        connectTimer.cancel();
        signal.removeEventListener("abort", onAbort);
        f();
      };
      const moved = () => settle(() => resolve({ kind: "moved" }));
      const lost = (why: string) =>
        settle(() =>
          reject(
            new AgentConnectionError(
              `Lost the connection to the workspace agent (through replica ${route.workerId}): ${why}`,
              "exchange",
            ),
          ),
        );
      const onAbort = () => {
        r.destroy();
        if (sent) settle(() => reject(signal.reason as Error));
        else moved();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const connectTimer = this.#clock.setTimer(
        this.#o.connectTimeoutMs ?? AGENT_RELAY_CONNECT_TIMEOUT_MS,
        () => {
          if (!sent) {
            r.destroy();
            moved();
          }
        },
      );
      const send = () => {
        if (sent || settled) return;
        sent = true;
        connectTimer.cancel();
        const headers = { ...req.headers, ...req.stamp?.(this.#clock.now() - began) };
        r.setHeader(RELAY_HEADERS_HEADER, encode(headers));
        r.end(body);
      };
      r.once("socket", (s) => {
        const ready = tls ? "secureConnect" : "connect";
        const pending = r.reusedSocket ? false : tls || s.connecting;
        if (pending) s.once(ready, send);
        else send();
      });
      r.once("error", (err) => (sent ? lost(err.message) : moved()));
      r.once("response", (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        let tooLarge = false;
        res.on("data", (c: Buffer) => {
          bytes += c.length;
          if (bytes > max) {
            tooLarge = true;
            res.destroy();
          } else chunks.push(c);
        });
        res.once("error", () => undefined);
        res.once("close", () => {
          const text = () => Buffer.concat(chunks).toString("utf8");
          if (res.statusCode !== 200) {
            let code: unknown;
            try {
              code = (JSON.parse(text()) as { code?: unknown }).code;
            } catch {
              // not ours
            }
            // Nothing reached the agent: the holder lost it, or is starting or stopping.
            if (code === RELAY_CODES.notHere || res.statusCode === 503) return moved();
            if (code === RELAY_CODES.lost || (res.statusCode ?? 0) >= 500)
              return lost(`replica answered ${res.statusCode}`);
            // A refusal of the request itself (a wrong secret, say): it never went further.
            return moved();
          }
          if (tooLarge) return settle(() => reject(new AgentAnswerTooLargeError(max)));
          if (!res.complete) return lost("the answer was cut off");
          const status = Number(res.headers[RELAY_STATUS_HEADER]);
          const raw = res.headers[RELAY_HEADERS_HEADER];
          let rawHeaders: string[] = [];
          try {
            const v = typeof raw === "string" ? decode(raw) : [];
            if (Array.isArray(v)) rawHeaders = v.filter((x): x is string => typeof x === "string");
          } catch {
            // no headers
          }
          settle(() =>
            resolve({
              kind: "answer",
              answer: answerOf(status, rawHeaders, Buffer.concat(chunks)),
            }),
          );
        });
      });
    });
  }
}

/** The parsed relayed request, or why it is not one. */
function parseRelayed(
  headers: http.IncomingHttpHeaders,
):
  | { ok: true; method: string; path: string; headers: Record<string, string | string[]> }
  | { ok: false; message: string } {
  const method = headers[RELAY_METHOD_HEADER];
  const path = headers[RELAY_PATH_HEADER];
  const encoded = headers[RELAY_HEADERS_HEADER];
  if (method !== "GET" && method !== "POST") return { ok: false, message: "Bad method." };
  if (typeof path !== "string" || !path.startsWith("/api/"))
    return { ok: false, message: "Bad path." };
  const out: Record<string, string | string[]> = {};
  try {
    const v = typeof encoded === "string" ? decode(encoded) : {};
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not an object");
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (typeof x === "string") out[k] = x;
      else if (Array.isArray(x) && x.every((y) => typeof y === "string")) out[k] = x;
    }
  } catch {
    return { ok: false, message: "Bad headers." };
  }
  return { ok: true, method, path: decodeURI(path), headers: out };
}

/** The tool call's age grown by `extraMs`, when the request carries one. */
function grownAge(headers: Record<string, string | string[]>, extraMs: number): void {
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== AGE_HEADER.toLowerCase() || typeof v !== "string") continue;
    if (!/^[0-9]+$/.test(v) || Number(v) > MAX_AGE_MS) return; // the agent refuses it as it is
    headers[k] = String(Math.min(MAX_AGE_MS, Number(v) + Math.max(0, Math.floor(extraMs))));
  }
}

function answerJson(res: http.ServerResponse, status: number, code: string, message: string) {
  const body = JSON.stringify({ message, code });
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * The holder's side: sends one relayed request on `session` (undefined: not held here) and
 * streams the agent's answer back. `enteredAt` is when the request arrived (on `clock`).
 */
export async function serveRelayedExchange(
  session: http2.ClientHttp2Session | undefined,
  req: http.IncomingMessage,
  body: Buffer,
  res: http.ServerResponse,
  o: { enteredAt: number; clock?: Clock },
): Promise<void> {
  const clock = o.clock ?? realClock;
  const parsed = parseRelayed(req.headers);
  if (!parsed.ok) return answerJson(res, 400, "bad_relay_request", parsed.message);
  if (!session || session.closed || session.destroyed)
    return answerJson(
      res,
      409,
      RELAY_CODES.notHere,
      "This replica holds no connection of the agent.",
    );
  const gone = new AbortController();
  res.once("close", () => gone.abort());
  grownAge(parsed.headers, clock.now() - o.enteredAt);
  let head;
  try {
    head = await requestOnSession(
      session,
      {
        method: parsed.method,
        path: parsed.path,
        headers: parsed.headers,
        ...(parsed.method === "POST" && { body }),
      },
      gone.signal,
    );
  } catch (err) {
    if (gone.signal.aborted) return;
    if (err instanceof AgentConnectionError && err.phase === "connect")
      return answerJson(res, 409, RELAY_CODES.notHere, err.message);
    return answerJson(res, 502, RELAY_CODES.lost, (err as Error).message);
  }
  res.writeHead(200, {
    "content-type": "application/octet-stream",
    [RELAY_STATUS_HEADER]: String(head.status),
    [RELAY_HEADERS_HEADER]: encode(head.rawHeaders),
  });
  const stream = head.stream;
  let ended = false;
  stream.on("data", (c: Buffer) => {
    if (!res.write(c)) {
      stream.pause();
      res.once("drain", () => stream.resume());
    }
  });
  stream.once("end", () => {
    ended = true;
    res.end();
  });
  stream.once("close", () => {
    // A cut answer is cut here too, so the caller sees an incomplete one, not a short one.
    if (!ended) res.destroy();
  });
  gone.signal.addEventListener("abort", () => stream.destroy(), { once: true });
}
