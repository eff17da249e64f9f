// One dial-out agent's connection, on the server's side: the handshake's answer (101, or a
// refusal), the HTTP/2 client session on the upgraded socket, its pings, and one request over
// it. A request is written only on a live session, so its late headers (the tool call's age)
// are stamped at the moment it goes out; a failure before the agent could have read it is
// `connect` (nothing was sent), any later one `exchange` (it may have reached the agent).

import http2 from "node:http2";
import type { Duplex } from "node:stream";
import {
  AGENT_UPGRADE_PROTOCOL,
  AgentAnswerTooLargeError,
  AgentConnectionError,
  MAX_AGENT_ANSWER_BYTES,
  realClock,
  type AgentAnswer,
  type Clock,
  type Timer,
} from "../../contract/index.ts";

/** The server pings each agent this often, and drops a connection whose ping goes unanswered. */
export const AGENT_SESSION_PING_INTERVAL_MS = 15_000;
export const AGENT_SESSION_PING_TIMEOUT_MS = 10_000;

/** Headers HTTP/2 forbids (connection-specific); never forwarded onto a session. */
const CONNECTION_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "host",
  "http2-settings",
  "te",
]);

export interface AgentSessionOptions {
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  clock?: Clock;
}

/**
 * Answers the handshake with 101 and opens the HTTP/2 client session on the socket (the agent
 * is the server). Bytes the agent sent after its request (`head`) go back into the socket.
 */
export function openAgentSession(
  socket: Duplex,
  head: Buffer,
  o: AgentSessionOptions = {},
): http2.ClientHttp2Session {
  const clock = o.clock ?? realClock;
  const pingIntervalMs = o.pingIntervalMs ?? AGENT_SESSION_PING_INTERVAL_MS;
  // A ping is answered within a round trip: a short interval (tests) gets a short timeout too.
  const pingTimeoutMs = o.pingTimeoutMs ?? Math.min(AGENT_SESSION_PING_TIMEOUT_MS, pingIntervalMs);
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${AGENT_UPGRADE_PROTOCOL}\r\n\r\n`,
  );
  if (head.length > 0) socket.unshift(head);
  const s = socket as Duplex & {
    setNoDelay?: (b: boolean) => void;
    setTimeout?: (ms: number) => void;
  };
  s.setTimeout?.(0);
  s.setNoDelay?.(true);
  // The HTTP server made the socket half-open capable: an agent's FIN would leave the session
  // open (and its requests hanging) until a ping failed. The agent going away ends it at once.
  socket.once("end", () => socket.destroy());
  const session = http2.connect("http://tether-agent.invalid", {
    createConnection: () => socket,
  });
  // Every failure also closes the session; "close" is what the holder follows.
  session.on("error", () => undefined);
  let pingTimer: Timer | undefined;
  let deadline: Timer | undefined;
  const schedule = () => {
    pingTimer = clock.setTimer(pingIntervalMs, () => {
      if (session.destroyed || session.closed) return;
      deadline = clock.setTimer(pingTimeoutMs, () => session.destroy());
      const sent = session.ping((err) => {
        deadline?.cancel();
        if (!err) schedule();
      });
      if (!sent) deadline.cancel();
    });
  };
  schedule();
  session.once("close", () => {
    pingTimer?.cancel();
    deadline?.cancel();
  });
  return session;
}

/** Refuses a handshake with `status` and a JSON `{message, code}` body, then closes the socket. */
export function refuseAgentUpgrade(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
): void {
  const body = JSON.stringify({ message, code });
  const reason = { 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 409: "Conflict" };
  socket.end(
    `HTTP/1.1 ${status} ${(reason as Record<number, string>)[status] ?? "Service Unavailable"}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}

/** One request onto a session: headers may repeat (a value list), bodies are bytes. */
export interface SessionRequest {
  method: string;
  /** Path and query, as on the request line. */
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
}

/** The agent's answer head, with its body still streaming. */
export interface SessionResponse {
  status: number;
  /** Name, value, name, value…: every header as received (lower-case), repeats kept. */
  rawHeaders: string[];
  stream: http2.ClientHttp2Stream;
}

/**
 * Sends `req` on the session and resolves once the answer's head arrives. Rejects with an
 * AgentConnectionError (`connect` when the agent cannot have read it), or with the signal's
 * reason when it aborts (the stream is canceled; the agent sees its client go away).
 */
export function requestOnSession(
  session: http2.ClientHttp2Session,
  req: SessionRequest,
  signal: AbortSignal,
): Promise<SessionResponse> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  if (session.closed || session.destroyed)
    return Promise.reject(new AgentConnectionError("The agent's connection is closed.", "connect"));
  const headers: http2.OutgoingHttpHeaders = { ":method": req.method, ":path": req.path };
  for (const [name, value] of Object.entries(req.headers)) {
    const n = name.toLowerCase();
    if (!CONNECTION_HEADERS.has(n)) headers[n] = value;
  }
  let stream: http2.ClientHttp2Stream;
  try {
    stream = session.request(headers, { endStream: req.body === undefined });
  } catch (err) {
    return Promise.reject(
      new AgentConnectionError(`Cannot send to the agent: ${(err as Error).message}`, "connect", {
        cause: err,
      }),
    );
  }
  return new Promise((resolve, reject) => {
    let answered = false;
    const onAbort = () => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    stream.once("response", (h: http2.IncomingHttpHeaders, _flags: number, raw: string[]) => {
      answered = true;
      signal.removeEventListener("abort", onAbort);
      const rawHeaders: string[] = [];
      for (let i = 0; i + 1 < raw.length; i += 2)
        if (!raw[i]!.startsWith(":")) rawHeaders.push(raw[i]!, raw[i + 1]!);
      resolve({ status: Number(h[":status"] ?? 0), rawHeaders, stream });
    });
    stream.on("error", () => undefined); // "close" follows; its rstCode says what happened
    stream.once("close", () => {
      if (answered) return;
      signal.removeEventListener("abort", onAbort);
      if (signal.aborted) return;
      // A stream the agent refused (or a GOAWAY left unprocessed) never reached a handler.
      const refused = stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM;
      reject(
        new AgentConnectionError(
          refused
            ? "The agent's connection closed before the request was sent."
            : "Lost the connection to the workspace agent before it answered.",
          refused ? "connect" : "exchange",
        ),
      );
    });
    if (req.body !== undefined) writeBody(stream, req.body);
  });
}

/** Bytes of a body handed to the session at a time. */
const BODY_CHUNK_BYTES = 64 * 1024;

/**
 * Writes the body in chunks, as the agent takes them: a whole large body handed over at once
 * counts against the session's memory and gets the stream reset (ENHANCE_YOUR_CALM) when the
 * agent stops reading early, e.g. to answer 413. Stops when the stream closes.
 */
function writeBody(stream: http2.ClientHttp2Stream, body: Buffer): void {
  let offset = 0;
  const pump = () => {
    while (offset < body.length) {
      if (stream.destroyed || stream.closed) return;
      const chunk = body.subarray(offset, offset + BODY_CHUNK_BYTES);
      offset += chunk.length;
      if (!stream.write(chunk)) {
        stream.once("drain", pump);
        return;
      }
    }
    stream.end();
  };
  pump();
}

/** Reads an answer's whole body: a cut stream is an `exchange` failure, a long one too large. */
export function readAnswer(
  r: SessionResponse,
  signal: AbortSignal,
  maxBytes = MAX_AGENT_ANSWER_BYTES,
): Promise<AgentAnswer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let ended = false;
    let tooLarge = false;
    const onAbort = () => {
      r.stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(signal.reason as Error);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    r.stream.on("data", (c: Buffer) => {
      bytes += c.length;
      if (bytes > maxBytes) {
        tooLarge = true;
        r.stream.close(http2.constants.NGHTTP2_CANCEL);
        return;
      }
      chunks.push(c);
    });
    r.stream.once("end", () => (ended = true));
    r.stream.once("close", () => {
      signal.removeEventListener("abort", onAbort);
      if (signal.aborted) return;
      if (tooLarge) return reject(new AgentAnswerTooLargeError(maxBytes));
      if (!ended) {
        return reject(
          new AgentConnectionError(
            "Lost the connection to the workspace agent mid-answer.",
            "exchange",
          ),
        );
      }
      resolve(answerOf(r.status, r.rawHeaders, Buffer.concat(chunks)));
    });
  });
}

/** An AgentAnswer from a status, raw headers and body. */
export function answerOf(status: number, rawHeaders: string[], body: Buffer): AgentAnswer {
  const values = (name: string) => {
    const out: string[] = [];
    for (let i = 0; i + 1 < rawHeaders.length; i += 2)
      if (rawHeaders[i]!.toLowerCase() === name) out.push(rawHeaders[i + 1]!);
    return out;
  };
  return { status, contentType: values("content-type")[0], body, headerValues: values };
}
