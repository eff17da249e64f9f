// How the agent client's requests reach an agent: one exchange at a time over a connection the
// transport owns. The client (client.ts) builds requests and reads answers; a transport only
// moves bytes, and keeps the one rule CONTRACT.md 9 puts on it: nothing is written before the
// connection is ready, and only then are the request's late headers (the tool call's age plus
// the time spent connecting) stamped. `HttpTransport` speaks HTTP/1.1 or HTTPS to an agent's
// URL; other transports (an agent's dial-out connection) implement the same interface.

import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { realClock, type Clock } from "./clock.ts";

/** Largest answer read from an agent; a longer one fails with AgentAnswerTooLargeError. */
export const MAX_AGENT_ANSWER_BYTES = 16 * 1024 * 1024;

/** One request, as the client hands it to a transport. */
export interface AgentRequest {
  method: "GET" | "POST";
  /** The path and query string, as sent on the request line. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /**
   * Headers computed once the connection is ready, just before the request is written, from
   * the time spent getting the connection (ms): the tool call headers with their age.
   */
  stamp?: (connectMs: number) => Record<string, string>;
}

/** A whole answer, whatever its status. */
export interface AgentAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  /** Every value the answer carries for a header (lower-case name), in order; repeats kept. */
  headerValues(name: string): string[];
}

export interface AgentTransport {
  /** Sends one request and reads its whole answer; `signal` ends it (rejecting with its reason). */
  exchange(req: AgentRequest, signal: AbortSignal): Promise<AgentAnswer>;
  /** Closes idle connections; later exchanges open new ones. */
  close(): void;
}

/** The agent could not be reached, or the connection failed before a full answer arrived. */
export class AgentConnectionError extends Error {
  override readonly name = "AgentConnectionError";
  constructor(
    message: string,
    /** `connect`: nothing was sent; `exchange`: the request may have reached the agent. */
    readonly phase: "connect" | "exchange",
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The connection was lost after the request went out: it may have reached the agent (and had
 * its effect), and sending it again may get the answer.
 */
export function isLostAnswer(err: unknown): boolean {
  return err instanceof AgentConnectionError && err.phase === "exchange";
}

/** The agent's answer passed MAX_AGENT_ANSWER_BYTES (or the transport's own cap); it was cut off. */
export class AgentAnswerTooLargeError extends Error {
  override readonly name = "AgentAnswerTooLargeError";
  constructor(readonly limitBytes: number) {
    super(`The workspace agent's answer is larger than ${limitBytes} bytes; it was not read.`);
  }
}

/** The address a transport may not connect to (AddressPolicy said no). */
export class AgentAddressRefusedError extends AgentConnectionError {
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`The workspace agent's address ${address} (${host}) is not allowed.`, "connect");
  }
}

/** Decides, for every connection, whether an agent's resolved IP address may be used. */
export type AddressPolicy = (address: string, family: 4 | 6) => boolean;

export interface HttpTransportOptions {
  /** `http://host:port` or `https://host:port` of the agent. */
  baseUrl: string;
  /**
   * Checked on every new connection, against the IP address it is about to use (resolved at
   * that moment, so a name that changes its answer after registration is checked again).
   * Every address is allowed when unset.
   */
  allowAddress?: AddressPolicy;
  /** Cap on an answer's bytes (default MAX_AGENT_ANSWER_BYTES). */
  maxAnswerBytes?: number;
  /** Measures the time spent connecting; the real clock by default. */
  clock?: Clock;
  /** TLS options for https agents (a private CA, say); Node's defaults otherwise. */
  tls?: Pick<https.AgentOptions, "ca" | "rejectUnauthorized" | "servername">;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** dns.lookup, keeping only the addresses `allow` lets through (both of its callback forms). */
function filteredLookup(allow: AddressPolicy) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "");
      const ok = addresses.filter((a) => allow(a.address, a.family === 6 ? 6 : 4));
      if (ok.length === 0) {
        return callback(
          new AgentAddressRefusedError(hostname, addresses[0]?.address ?? "(none)"),
          "",
        );
      }
      if (options.all) return callback(null, ok);
      callback(null, ok[0]!.address, ok[0]!.family);
    });
  };
}

export class HttpTransport implements AgentTransport {
  readonly #url: URL;
  readonly #tls: boolean;
  readonly #pool: http.Agent;
  readonly #allow: AddressPolicy | undefined;
  readonly #max: number;
  readonly #clock: Clock;

  constructor(o: HttpTransportOptions) {
    this.#url = new URL(o.baseUrl);
    if (this.#url.protocol !== "http:" && this.#url.protocol !== "https:")
      throw new Error(`Agent URL must be http or https: ${o.baseUrl}`);
    this.#tls = this.#url.protocol === "https:";
    this.#allow = o.allowAddress;
    this.#max = o.maxAnswerBytes ?? MAX_AGENT_ANSWER_BYTES;
    this.#clock = o.clock ?? realClock;
    const lookup = this.#allow && filteredLookup(this.#allow);
    this.#pool = this.#tls
      ? new https.Agent({ keepAlive: true, ...(lookup && { lookup }), ...o.tls })
      : new http.Agent({ keepAlive: true, ...(lookup && { lookup }) });
  }

  close(): void {
    this.#pool.destroy();
  }

  exchange(spec: AgentRequest, signal: AbortSignal): Promise<AgentAnswer> {
    const began = this.#clock.now();
    // An IP literal is never looked up: check it here.
    const host = this.#url.hostname.replace(/^\[|\]$/g, "");
    const family = net.isIP(host);
    if (this.#allow && family !== 0 && !this.#allow(host, family === 6 ? 6 : 4)) {
      return Promise.reject(new AgentAddressRefusedError(host, host));
    }
    return new Promise((resolve, reject) => {
      const request = this.#tls ? https.request : http.request;
      const req = request({
        host: this.#url.hostname,
        port: this.#url.port || (this.#tls ? 443 : 80),
        method: spec.method,
        path: spec.path,
        headers: spec.headers,
        agent: this.#pool,
      });
      let sent = false;
      const onAbort = () => {
        req.destroy();
        reject(signal.reason as Error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const send = () => {
        if (sent || signal.aborted) return;
        sent = true;
        if (spec.stamp) {
          for (const [n, v] of Object.entries(spec.stamp(this.#clock.now() - began)))
            req.setHeader(n, v);
        }
        req.end(spec.body);
      };
      req.once("socket", (s) => {
        // A TLS socket is ready once its handshake is done; a plain one once it connected.
        const ready = this.#tls ? "secureConnect" : "connect";
        const pending = req.reusedSocket ? false : this.#tls || s.connecting;
        if (pending) s.once(ready, send);
        else send();
      });
      req.once("error", (err) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) return;
        if (err instanceof AgentConnectionError) return reject(err);
        const phase = sent ? "exchange" : "connect";
        const what = phase === "connect" ? "Cannot connect to" : "Lost the connection to";
        reject(
          new AgentConnectionError(`${what} the workspace agent: ${err.message}`, phase, {
            cause: err,
          }),
        );
      });
      req.once("response", (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        let tooLarge = false;
        res.on("data", (c: Buffer) => {
          bytes += c.length;
          if (bytes > this.#max) {
            tooLarge = true;
            res.destroy();
            return;
          }
          chunks.push(c);
        });
        // "close" follows both a full answer ("end" first) and a cut one (no "end").
        res.once("error", () => undefined);
        res.once("close", () => {
          signal.removeEventListener("abort", onAbort);
          if (signal.aborted) return;
          if (tooLarge) return reject(new AgentAnswerTooLargeError(this.#max));
          if (!res.complete) {
            reject(
              new AgentConnectionError(
                "Lost the connection to the workspace agent mid-answer.",
                "exchange",
              ),
            );
            return;
          }
          const raw = res.rawHeaders;
          resolve({
            status: res.statusCode ?? 0,
            contentType: res.headers["content-type"],
            body: Buffer.concat(chunks),
            headerValues: (name) => {
              const values: string[] = [];
              for (let i = 0; i < raw.length; i += 2)
                if (raw[i]!.toLowerCase() === name) values.push(raw[i + 1]!);
              return values;
            },
          });
        });
      });
    });
  }
}
