// A request Node's HTTP parser refuses before any route sees it — a head over the 16 KiB limit,
// bad framing, a head that took too long — is answered with a coded JSON error, and its
// connection closed gracefully. Node's own handler (and Fastify's) writes its answer and
// destroys the socket at once: the request's unread bytes make the kernel reset the connection,
// and a client still writing its request gets ECONNRESET instead of the answer (the fuzz
// campaign saw it, under load, for requests with an 18 KB query string). Here the answer is
// written, the write side ended, and what the client still sends is read and dropped until it
// closes or `lingerMs` pass, so the answer is what the client reads. Used by the server's API
// and the agent's HTTP server.

import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";

/** How long a refused connection is drained before it is destroyed. */
export const LINGER_MS = 2_000;

export const MALFORMED_REQUEST_CODES = {
  malformed_request: 400,
  request_timeout: 408,
  request_head_too_large: 431,
} as const;

export type MalformedRequestCode = keyof typeof MALFORMED_REQUEST_CODES;

export interface MalformedRequest {
  code: MalformedRequestCode;
  status: (typeof MALFORMED_REQUEST_CODES)[MalformedRequestCode];
  message: string;
}

export function classifyClientError(err: NodeJS.ErrnoException): MalformedRequest {
  const of = (code: MalformedRequestCode, message: string): MalformedRequest => ({
    code,
    status: MALFORMED_REQUEST_CODES[code],
    message,
  });
  switch (err.code) {
    case "HPE_HEADER_OVERFLOW":
      return of(
        "request_head_too_large",
        "The request line and headers are larger than the server takes (16 KiB).",
      );
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return of("request_timeout", "The request was not received in time.");
    default:
      return of("malformed_request", "The request is not valid HTTP/1.1.");
  }
}

/** A `clientError` listener: `body` makes the JSON error body of the refusal. */
export function answerMalformedRequest(
  err: NodeJS.ErrnoException,
  socket: Duplex,
  body: (m: MalformedRequest) => object,
  lingerMs = LINGER_MS,
): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  socket.on("error", () => {}); // the peer may reset it while it drains: nothing to do then
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) {
    // An answer is already on its way (or cannot be written): a second one would corrupt it.
    socket.destroy();
    return;
  }
  const m = classifyClientError(err);
  const text = JSON.stringify(body(m));
  socket.end(
    `HTTP/1.1 ${m.status} ${STATUS_CODES[m.status]}\r\n` +
      "Content-Type: application/json\r\n" +
      `Content-Length: ${Buffer.byteLength(text)}\r\n` +
      "Connection: close\r\n\r\n" +
      text,
  );
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  // Read and drop the rest: the parser no longer looks at it, and unread bytes reset the line.
  socket.removeAllListeners("data");
  socket.on("data", () => {});
  socket.resume();
}
