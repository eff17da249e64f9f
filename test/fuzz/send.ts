// Sends one fuzz request: through node:http (repeated headers kept apart, bodies as bytes) or,
// for what node:http refuses to send (bytes a header may not hold, a body shorter than its
// Content-Length, a body sent slowly), over a raw socket.

import http from "node:http";
import net from "node:net";

export interface WireRequest {
  method: string;
  /** Path and query exactly as on the request line. */
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
  /** Raw socket delivery; the default is node:http. */
  raw?:
    | { kind: "bytes"; bytes: Buffer }
    | { kind: "truncated"; declared: number }
    | { kind: "slow"; chunks: number; delayMs: number };
}

export interface WireAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export type Outcome =
  { kind: "answer"; answer: WireAnswer } | { kind: "none"; error: string; expected: boolean };

/** The largest answer body the campaign reads; more is dropped (and counted as read). */
const MAX_ANSWER_BYTES = 8 << 20;

export function send(baseUrl: string, r: WireRequest, timeoutMs: number): Promise<Outcome> {
  if (r.raw) return sendRaw(baseUrl, r, timeoutMs);
  const url = new URL(baseUrl);
  return new Promise((resolve) => {
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (o: Outcome) => {
      if (done) return;
      done = true;
      timers.forEach(clearTimeout);
      resolve(o);
    };
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: r.path,
        headers: r.headers,
        agent: false,
        setHost: true,
      });
    } catch (err) {
      // node:http refused to send it (an invalid header, say): nothing reached the target.
      finish({ kind: "none", error: String(err), expected: true });
      return;
    }
    timers.push(
      setTimeout(() => {
        req.destroy();
        finish({ kind: "none", error: `no answer in ${timeoutMs} ms`, expected: false });
      }, timeoutMs),
    );
    req.on("response", (res) => {
      if (String(res.headers["content-type"] ?? "").includes("text/event-stream")) {
        // A stream stays open: its status and first bytes are the answer.
        res.once("data", (c: Buffer) => {
          finish({
            kind: "answer",
            answer: { status: res.statusCode ?? 0, headers: res.headers, body: c },
          });
          req.destroy();
        });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size <= MAX_ANSWER_BYTES) chunks.push(c);
      });
      res.on("error", (err) =>
        finish({ kind: "none", error: `answer cut: ${String(err)}`, expected: false }),
      );
      res.on("end", () =>
        finish({
          kind: "answer",
          answer: {
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
          },
        }),
      );
    });
    req.on("error", (err) => {
      const code = (err as NodeJS.ErrnoException).code ?? "";
      // A server may close a connection whose request it refused mid-body (a 413 written before
      // the whole body was read): the write fails, the answer may still have arrived.
      // HPE_*: the answer came with the connection closed mid-way (a refusal of bad framing).
      finish({
        kind: "none",
        error: `${code} ${err.message}`,
        // A body above the 1 MiB JSON limit is refused (413) and its connection closed while it
        // is still being written: the write fails with EPIPE or ECONNRESET.
        expected:
          code === "EPIPE" ||
          code.startsWith("HPE_") ||
          (code === "ECONNRESET" && (r.body?.length ?? 0) > 1 << 20),
      });
    });
    req.end(r.body);
  });
}

/** The request head; header strings are Latin-1 (one char a byte), as node:http sends them. */
function head(r: WireRequest, host: string, contentLength?: number): string {
  const lines = [`${r.method} ${r.path} HTTP/1.1`, `Host: ${host}`, "Connection: close"];
  for (const [k, v] of Object.entries(r.headers)) {
    for (const one of Array.isArray(v) ? v : [v]) lines.push(`${k}: ${one}`);
  }
  if (contentLength !== undefined) lines.push(`Content-Length: ${contentLength}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

function sendRaw(baseUrl: string, r: WireRequest, timeoutMs: number): Promise<Outcome> {
  const url = new URL(baseUrl);
  const raw = r.raw!;
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (o: Outcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(o);
    };
    const timer = setTimeout(
      () =>
        finish(
          raw.kind === "truncated"
            ? { kind: "none", error: "truncated: no answer (expected)", expected: true }
            : { kind: "none", error: `no answer in ${timeoutMs} ms`, expected: false },
        ),
      raw.kind === "truncated" ? Math.min(timeoutMs, 1_500) : timeoutMs,
    );
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const parsed = parseAnswer(Buffer.concat(chunks));
      if (parsed) finish({ kind: "answer", answer: parsed });
      else
        finish({
          kind: "none",
          error: "closed without an answer",
          expected: raw.kind !== "slow",
        });
    });
    socket.on("connect", () => {
      const body = r.body ?? Buffer.alloc(0);
      const host = url.host;
      switch (raw.kind) {
        case "bytes":
          socket.end(raw.bytes);
          return;
        case "truncated":
          // Declares more than it sends, then keeps the connection open: the server waits.
          socket.write(
            Buffer.from(head(r, host, Math.max(raw.declared, body.length + 1)), "latin1"),
          );
          socket.write(body);
          return;
        case "slow": {
          socket.write(Buffer.from(head(r, host, body.length), "latin1"));
          const size = Math.max(1, Math.ceil(body.length / raw.chunks));
          let at = 0;
          const next = () => {
            if (done || socket.destroyed) return;
            if (at >= body.length) return;
            socket.write(body.subarray(at, at + size));
            at += size;
            setTimeout(next, raw.delayMs);
          };
          next();
          return;
        }
      }
    });
  });
}

/** A whole HTTP/1.1 answer read from a closed connection (Content-Length or chunked). */
function parseAnswer(buf: Buffer): WireAnswer | undefined {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
  if (!m) return undefined;
  const headers: http.IncomingHttpHeaders = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = buf.subarray(end + 4);
  if (headers["transfer-encoding"] === "chunked") {
    const out: Buffer[] = [];
    let at = 0;
    for (;;) {
      const nl = body.indexOf("\r\n", at);
      if (nl < 0) break;
      const n = parseInt(body.subarray(at, nl).toString("latin1"), 16);
      if (!(n > 0)) break;
      out.push(body.subarray(nl + 2, nl + 2 + n));
      at = nl + 2 + n + 2;
    }
    body = Buffer.concat(out);
  }
  return { status: Number(m[1]), headers, body };
}
