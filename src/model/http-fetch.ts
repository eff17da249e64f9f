// The fetch every provider is given (registry.ts): a provider's request — POST of a string or
// bytes to an http(s) URL — goes out through node:http(s), and anything else through the runtime's
// fetch. undici's fetch cost 0.2–0.6 ms more CPU per model step than node:http with the same AI
// SDK parsing on top (`npm run bench:step`; a replica under load spent a tenth less CPU per step,
// docs/benchmarks.md), on the thread that runs every chat of a replica. What a provider sees of
// the answer is what fetch gives: a Response whose body streams as the bytes arrive, decoded when
// the server compressed it; a connection that fails rejects with fetch's `TypeError("fetch
// failed")` and the cause, which the AI SDK reports as a retryable "Cannot connect to API"; a body
// cut short errors the stream; an abort rejects with the signal's reason. A redirect is followed
// as fetch follows it, but only within the origin the request went to: the request carries the
// model's key (in `authorization`, `x-api-key`, `api-key`...), which fetch would carry on to
// another origin in any header but `authorization`, so a redirect elsewhere is answered as it came
// (worker/failure.ts says what to do). undici's three bounds hold too, with its error codes (the
// failure words of worker/failure.ts read them): a connection not made in 10 s, no byte of an
// answer in 300 s, a body that stalls for 300 s.

import http from "node:http";
import https from "node:https";
import type { Readable } from "node:stream";
import zlib from "node:zlib";

/** undici's bounds: a connection being made, then the socket quiet (before the answer, in it). */
export const CONNECT_TIMEOUT_MS = 10_000;
export const QUIET_TIMEOUT_MS = 300_000;
/** Bytes the body holds before the socket is paused until the provider reads. */
const BODY_HIGH_WATER_BYTES = 64 * 1024;
/** Statuses whose response has no body (fetch refuses to build one with a body). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Redirect statuses fetch follows, and how many in a row it follows. */
const REDIRECT = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 20;

type RequestBody = string | Uint8Array | ArrayBuffer | undefined;

export const httpFetch: typeof fetch = (input, init) => boundedFetch(input, init);

/** httpFetch with other bounds than undici's (tests). */
export function boundedFetch(
  input: Parameters<typeof fetch>[0],
  init?: RequestInit,
  bounds?: Bounds,
): Promise<Response> {
  const url =
    input instanceof URL
      ? input
      : typeof input === "string" && URL.canParse(input)
        ? new URL(input)
        : null;
  const body = init?.body ?? undefined;
  if (
    url === null ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    !isPlainBody(body) ||
    (init?.redirect !== undefined && init.redirect !== "follow")
  ) {
    return fetch(input, init);
  }
  return request(url, init ?? {}, body, bounds);
}

function timeoutError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

function isPlainBody(body: unknown): body is RequestBody {
  return (
    body === undefined ||
    typeof body === "string" ||
    body instanceof Uint8Array ||
    body instanceof ArrayBuffer
  );
}

/** The bounds of a request (tests shorten them). */
export interface Bounds {
  connectMs: number;
  quietMs: number;
}

/**
 * Where a redirect answer sends the request next, as fetch would resend it (a 303, and a 301 or
 * 302 of a POST, become a GET without the body); undefined when it is not followed: not a
 * redirect, too many in a row, or to another origin than the one the request went to.
 */
function redirectTarget(
  url: URL,
  init: RequestInit,
  body: RequestBody,
  res: http.IncomingMessage,
  redirects: number,
): { url: URL; init: RequestInit; body: RequestBody } | undefined {
  const location = res.headers.location;
  if (!REDIRECT.has(res.statusCode ?? 0) || location === undefined) return undefined;
  if (redirects >= MAX_REDIRECTS || !URL.canParse(location, url.href)) return undefined;
  const next = new URL(location, url);
  if (next.origin !== url.origin) return undefined;
  const method = (init.method ?? "GET").toUpperCase();
  const status = res.statusCode;
  if (
    status === 303 ? method !== "HEAD" : (status === 301 || status === 302) && method === "POST"
  ) {
    const headers = new Headers(init.headers);
    for (const name of ["content-type", "content-encoding", "content-language", "content-location"])
      headers.delete(name);
    return { url: next, init: { ...init, method: "GET", headers }, body: undefined };
  }
  return { url: next, init, body };
}

function request(
  url: URL,
  init: RequestInit,
  body: RequestBody,
  bounds: Bounds = { connectMs: CONNECT_TIMEOUT_MS, quietMs: QUIET_TIMEOUT_MS },
  redirects = 0,
): Promise<Response> {
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(signal.reason as Error);
  const bytes =
    body === undefined
      ? undefined
      : typeof body === "string"
        ? Buffer.from(body)
        : body instanceof ArrayBuffer
          ? Buffer.from(body)
          : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const headers = headerRecord(init.headers);
  if (bytes !== undefined) headers["content-length"] = String(bytes.length);
  return new Promise<Response>((resolve, reject) => {
    let response: http.IncomingMessage | undefined;
    /** On an abort: the answer rejects, or its body errors once read, with the reason. */
    let fail = (err: Error): void => reject(err);
    const onAbort = (): void => {
      const reason = signal!.reason as Error;
      fail(reason);
      req.destroy(reason);
      response?.destroy(reason);
    };
    const done = (): void => signal?.removeEventListener("abort", onAbort);
    const req = (url.protocol === "https:" ? https : http).request(
      url,
      { method: init.method ?? "GET", headers },
      (res) => {
        response = res;
        const status = res.statusCode ?? 0;
        const next = redirectTarget(url, init, body, res, redirects);
        if (next !== undefined) {
          res.resume();
          done();
          request(next.url, next.init, next.body, bounds, redirects + 1).then(resolve, reject);
          return;
        }
        let answer: ReadableStream<Uint8Array> | null = null;
        if (NULL_BODY.has(status)) {
          res.resume();
          done();
        } else {
          const stream = bodyStream(res, done);
          answer = stream.body;
          fail = stream.error;
        }
        resolve(
          new Response(answer, {
            status,
            statusText: res.statusMessage,
            headers: responseHeaders(res),
          }),
        );
      },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
    req.on("socket", (socket) => {
      if (!socket.connecting) return; // a kept-alive connection
      const timer = setTimeout(
        () => socket.destroy(timeoutError("UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error")),
        bounds.connectMs,
      );
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
    req.setTimeout(bounds.quietMs, () => {
      if (response === undefined)
        req.destroy(timeoutError("UND_ERR_HEADERS_TIMEOUT", "Headers Timeout Error"));
      else response.destroy(timeoutError("UND_ERR_BODY_TIMEOUT", "Body Timeout Error"));
    });
    req.on("error", (err) => {
      done();
      // Before the answer: fetch's own words for a request that never got one.
      if (response === undefined) reject(new TypeError("fetch failed", { cause: err }));
    });
    req.end(bytes);
  });
}

/** The request's headers as node:http takes them (names lower-cased, as fetch sends them). */
function headerRecord(h: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  if (h instanceof Headers || Array.isArray(h)) {
    for (const [k, v] of new Headers(h)) out[k] = v;
    return out;
  }
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k.toLowerCase()] = String(v);
  return out;
}

function responseHeaders(res: http.IncomingMessage): Headers {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  return headers;
}

/**
 * The response's body as a web stream, decoded as its content-encoding says; the socket is
 * paused while BODY_HIGH_WATER_BYTES wait unread. A body that ends before its end errors the
 * stream with fetch's `TypeError("terminated")`; `error` errors it (an abort) from outside.
 */
function bodyStream(
  res: http.IncomingMessage,
  done: () => void,
): { body: ReadableStream<Uint8Array>; error: (err: unknown) => void } {
  const source = decoded(res);
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let finished = false;
  const error = (err: unknown): void => {
    if (finished) return;
    finished = true;
    done();
    controller.error(err);
  };
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        source.on("data", (chunk: Buffer) => {
          c.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((c.desiredSize ?? 0) <= 0) source.pause();
        });
        source.on("end", () => {
          if (finished) return;
          finished = true;
          done();
          c.close();
        });
        // node:http errors a message cut short ("aborted"); a decoder passes that on.
        source.on("error", (err) => error(new TypeError("terminated", { cause: err })));
      },
      pull() {
        source.resume();
      },
      cancel() {
        finished = true;
        done();
        res.destroy();
      },
    },
    { highWaterMark: BODY_HIGH_WATER_BYTES, size: (chunk) => chunk.byteLength },
  );
  return { body, error };
}

function decoded(res: http.IncomingMessage): Readable {
  const encoding = res.headers["content-encoding"]?.trim().toLowerCase();
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? zlib.createGunzip()
      : encoding === "deflate"
        ? zlib.createInflate()
        : encoding === "br"
          ? zlib.createBrotliDecompress()
          : undefined;
  if (decoder === undefined) return res;
  res.on("error", (err) => decoder.destroy(err));
  return res.pipe(decoder);
}
