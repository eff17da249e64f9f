// The fault proxy between the server replicas and one workspace agent. It is registered as
// the workspace's agent_url, forwards each request to the agent's *current* address (so an
// agent restart is transparent to the servers) and, per request, can pass it, delay the
// request or the response, drop the request (close the client socket without forwarding),
// cut the response (forward, then close the client socket instead of answering), or stay
// silent (hold it, never forward, until the client leaves). A silent window holds every
// request and, when it ends, drops the ones still held. Every request is logged with its tool
// call (from the Coder-Tool-Call-* headers, or the process / tool call ID in the route), what
// the proxy did, and whether the agent's response was delivered in full to the server.

import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  CHAT_ID_HEADER,
  MESSAGE_ID_HEADER,
  TOOL_CALL_ID_HEADER,
  parseChatId,
  toMessageId,
  toolCallUuid,
  unescapeToolCallId,
} from "../../src/contract/index.ts";
import type { Rng } from "./rng.ts";

export type ProxyAction =
  | "pass"
  | "delay_request"
  | "delay_response"
  | "drop_request"
  | "cut_response"
  | "silent"
  | "silent_window";

export interface ProxyLogEntry {
  /** The workspace agent this proxy fronts. */
  agent: string;
  method: string;
  /** The path with IDs replaced: `POST /api/v0/tool-calls/:id/cancel`. */
  route: string;
  /** The tool call's UUID: from the tool call headers, or the ID in a process / cancel route. */
  uuid?: string;
  /** The provider tool call ID, when the request carried tool call headers. */
  toolCallId?: string;
  action: ProxyAction;
  delayMs?: number;
  /** When the request arrived and when the proxy was done with it (ms since the epoch). */
  at: number;
  endedAt?: number;
  /** The request reached the agent. */
  forwarded: boolean;
  /** The agent's answer status, when it answered. */
  agentStatus?: number;
  /** The agent's response reached the server in full. */
  delivered: boolean;
  /** Why it was not delivered: "client gone", "agent down", ... */
  note?: string;
}

export interface FaultPolicy {
  /** Chance that a request gets a fault (0 = pass everything). */
  probability: number;
  /** Longest request delay: under the contract's 2 s age margin, so a delay never makes a restarted agent run a call it cannot vouch for. */
  maxRequestDelayMs: number;
  maxResponseDelayMs: number;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "proxy-connection",
  "upgrade",
  "host",
  "content-length",
]);

function headersWithout(h: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = v;
  return out;
}

function one(h: http.IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** The tool call a request is about, when it can be told. */
function toolCallOf(req: http.IncomingMessage, pathname: string) {
  const chat = parseChatId(one(req.headers, CHAT_ID_HEADER) ?? "");
  const msg = one(req.headers, MESSAGE_ID_HEADER);
  const escaped = one(req.headers, TOOL_CALL_ID_HEADER);
  const m = /^\/api\/v0\/(?:processes|tool-calls)\/([0-9a-f-]{36})\//.exec(pathname);
  if (chat && msg !== undefined && escaped !== undefined) {
    const id = unescapeToolCallId(escaped);
    const messageId = toMessageId(msg);
    if (id && messageId !== undefined) {
      return { uuid: toolCallUuid(chat, messageId, id) as string, toolCallId: id.toString() };
    }
  }
  return m ? { uuid: m[1]! } : {};
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FaultProxy {
  readonly log: ProxyLogEntry[] = [];
  #policy: FaultPolicy = { probability: 0, maxRequestDelayMs: 0, maxResponseDelayMs: 0 };
  #silentUntil = 0;
  #held = new Set<() => void>();
  #forced: { route: string; action: ProxyAction }[] = [];
  #server: http.Server;
  url = "";

  private constructor(
    readonly name: string,
    private readonly target: () => string,
    private readonly rng: Rng,
  ) {
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
  }

  static async start(name: string, target: () => string, rng: Rng): Promise<FaultProxy> {
    const p = new FaultProxy(name, target, rng);
    await new Promise<void>((resolve) => p.#server.listen(0, "127.0.0.1", resolve));
    p.url = `http://127.0.0.1:${(p.#server.address() as AddressInfo).port}`;
    return p;
  }

  setPolicy(policy: FaultPolicy): void {
    this.#policy = policy;
  }

  /** Holds every request for `ms`; the ones still held then are dropped. */
  silence(ms: number): void {
    this.#silentUntil = Math.max(this.#silentUntil, Date.now() + ms);
    setTimeout(() => {
      if (Date.now() < this.#silentUntil) return;
      for (const release of [...this.#held]) release();
    }, ms).unref();
  }

  /** Faults off, silence over (held requests are dropped). */
  calm(): void {
    this.setPolicy({ probability: 0, maxRequestDelayMs: 0, maxResponseDelayMs: 0 });
    this.#silentUntil = 0;
    for (const release of [...this.#held]) release();
  }

  /**
   * The next requests on `route` (as logged: `POST /api/v0/processes/start`) get `actions`,
   * one each in order, before the policy decides again (for tests of one fault).
   */
  force(route: string, ...actions: ("pass" | "drop_request" | "cut_response" | "silent")[]): void {
    this.#forced.push(...actions.map((action) => ({ route, action })));
  }

  /** How many requests got a fault. */
  get faults(): number {
    return this.log.filter((e) => e.action !== "pass").length;
  }

  #decide(route: string): { action: ProxyAction; delayMs?: number } {
    const forced = this.#forced.findIndex((f) => f.route === route);
    if (forced >= 0) return { action: this.#forced.splice(forced, 1)[0]!.action };
    if (Date.now() < this.#silentUntil) return { action: "silent_window" };
    const p = this.#policy;
    if (!this.rng.chance(p.probability)) return { action: "pass" };
    const action = this.rng.weighted({
      delay_request: 3,
      delay_response: 3,
      drop_request: 2,
      cut_response: 2,
      silent: 1,
    });
    if (action === "delay_request")
      return { action, delayMs: this.rng.int(50, p.maxRequestDelayMs) };
    if (action === "delay_response")
      return { action, delayMs: this.rng.int(50, p.maxResponseDelayMs) };
    return { action };
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://proxy");
    const entry: ProxyLogEntry = {
      agent: this.name,
      method: req.method ?? "GET",
      route: `${req.method} ${url.pathname.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, ":id")}`,
      ...toolCallOf(req, url.pathname),
      action: "pass",
      at: Date.now(),
      forwarded: false,
      delivered: false,
    };
    this.log.push(entry);
    let clientGone = false;
    res.on("close", () => {
      if (!res.writableFinished) clientGone = true;
    });
    const done = (note?: string) => {
      entry.endedAt = Date.now();
      if (note !== undefined) entry.note = note;
    };
    const chunks: Buffer[] = [];
    try {
      for await (const c of req) chunks.push(c as Buffer);
    } catch {
      return done("client gone");
    }
    const decided = this.#decide(entry.route);
    entry.action = decided.action;
    if (decided.delayMs !== undefined) entry.delayMs = decided.delayMs;

    switch (decided.action) {
      case "silent":
      case "silent_window": {
        // Hold the request without forwarding; a silent window ends by dropping it.
        await new Promise<void>((resolve) => {
          const release = () => {
            this.#held.delete(release);
            resolve();
          };
          if (decided.action === "silent_window") this.#held.add(release);
          res.once("close", release);
        });
        req.socket.destroy();
        return done(clientGone ? "client gone" : "dropped at the end of the silence");
      }
      case "drop_request":
        req.socket.destroy();
        return done();
      case "delay_request":
        await sleep(decided.delayMs!);
        break;
      case "pass":
      case "delay_response":
      case "cut_response":
        break;
    }

    const base = this.target();
    if (base === "") {
      req.socket.destroy();
      return done("agent down");
    }
    // One fresh upstream connection per request; the client leaving closes it, as a TCP
    // proxy would (so an abandoned long poll ends on the agent too).
    const answer = await new Promise<
      { status: number; headers: http.IncomingHttpHeaders; body: Buffer } | string
    >((resolve) => {
      const up = http.request(
        new URL(req.url ?? "/", base),
        { method: req.method, headers: headersWithout(req.headers), agent: false },
        (upRes) => {
          const body: Buffer[] = [];
          upRes.on("data", (c: Buffer) => body.push(c));
          upRes.on("end", () =>
            resolve({
              status: upRes.statusCode ?? 0,
              headers: upRes.headers,
              body: Buffer.concat(body),
            }),
          );
          upRes.on("error", () => resolve("agent connection lost"));
        },
      );
      up.on("error", () => resolve("agent down"));
      res.once("close", () => {
        if (clientGone) up.destroy();
      });
      up.end(Buffer.concat(chunks));
      entry.forwarded = true;
    });
    if (typeof answer === "string") {
      req.socket.destroy();
      return done(clientGone ? "client gone" : answer);
    }
    entry.agentStatus = answer.status;
    if (decided.action === "cut_response") {
      req.socket.destroy();
      return done();
    }
    if (decided.action === "delay_response") await sleep(decided.delayMs!);
    if (clientGone || res.destroyed) return done("client gone");
    await new Promise<void>((resolve) => {
      res.once("finish", () => {
        entry.delivered = true;
        resolve();
      });
      res.once("close", () => resolve());
      res.writeHead(answer.status, {
        ...headersWithout(answer.headers),
        "content-length": answer.body.length,
      });
      res.end(answer.body);
    });
    done(entry.delivered ? undefined : "client gone");
  }

  async close(): Promise<void> {
    this.calm();
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
