// The one place the UI talks to the server. It is signed in by the session cookie the server
// sets at login (HttpOnly, so a script injected later cannot read it; the UI never keeps the
// token its login answers, nor sends it itself); every request carries the CSRF
// header the server asks of cookie-authenticated requests. A 401 means the session is gone
// (signed out elsewhere, revoked, expired): the listeners show the sign-in page.

import { createParser } from "eventsource-parser";

const CSRF = { "x-tether-csrf": "1" };

const signedOutListeners = new Set<() => void>();

/** Calls `fn` whenever the server says the session is gone; returns the unsubscribe. */
export function onSignedOut(fn: () => void): () => void {
  signedOutListeners.add(fn);
  return () => signedOutListeners.delete(fn);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Which field is wrong and how ("password: must be at least 8 characters"). */
    readonly detail?: string,
    /** A throttled request (429): the seconds the server asks to wait (Retry-After). */
    readonly retryAfterS?: number,
    /** The error's stable code, where the server gives one. */
    readonly code?: string,
  ) {
    super(message);
  }
}

/** Retry-After in seconds (delta-seconds or an HTTP date), if present and sane. */
function retryAfter(h: string | null): number | undefined {
  if (h === null) return undefined;
  const n = /^\d+$/.test(h.trim()) ? Number(h) : (Date.parse(h) - Date.now()) / 1000;
  return Number.isFinite(n) && n >= 0 ? Math.ceil(n) : undefined;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers: {
      ...CSRF,
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let data: unknown;
  try {
    data = text === "" ? undefined : JSON.parse(text);
  } catch {
    data = undefined; // a proxy's HTML error page: the status says enough
  }
  if (!res.ok) {
    const e = (data ?? {}) as { message?: string; detail?: string; code?: string };
    if (res.status === 401) signedOutListeners.forEach((fn) => fn());
    throw new ApiError(
      res.status,
      e.message ?? `The server answered ${res.status}.`,
      e.detail,
      retryAfter(res.headers.get("retry-after")),
      e.code,
    );
  }
  return data as T;
}

export type StreamHandler = (event: string, data: unknown, id: string | undefined) => void;

/** The first pause before a reconnect; it doubles up to STREAM_RETRY_MAX_MS. */
const STREAM_RETRY_MIN_MS = 1000;
const STREAM_RETRY_MAX_MS = 10_000;

/**
 * No event and no heartbeat (the server writes one every 15 s) for this long: the connection is
 * gone without a word — a laptop slept, a route was lost — and is opened again.
 */
const STREAM_IDLE_MS = 45_000;

/** The reader's next chunk; or, when none came within `ms`, the reader canceled and an error. */
async function readWithin<T>(
  reader: ReadableStreamDefaultReader<T>,
  ms: number,
): Promise<ReadableStreamReadResult<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void reader.cancel().catch(() => {});
      reject(new Error(`stream: nothing for ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([reader.read(), idle]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Follows a chat's SSE stream (parsed by eventsource-parser) and reconnects after a drop from
 * the last committed message it saw (`fetch` rather than EventSource, which retries by itself
 * from the start and cannot say why it failed). An answer that will not change by asking again
 * (the chat is not there, 4xx) ends it: `onGone` gets the error, and nothing is retried.
 * Returns the stop function.
 */
export function followStream(
  chatId: string,
  onEvent: StreamHandler,
  onGone?: (e: ApiError) => void,
): () => void {
  const abort = new AbortController();
  let afterId: string | undefined;
  let pause = STREAM_RETRY_MIN_MS;
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const q = afterId === undefined ? "" : `?after_id=${encodeURIComponent(afterId)}`;
        const res = await fetch(`/api/v1/chats/${chatId}/stream${q}`, {
          headers: CSRF,
          signal: abort.signal,
        });
        if (res.status >= 400 && res.status < 500 && res.status !== 429) {
          const e = (await res.json().catch(() => ({}))) as { message?: string };
          if (res.status === 401) signedOutListeners.forEach((fn) => fn());
          onGone?.(new ApiError(res.status, e.message ?? `The server answered ${res.status}.`));
          return;
        }
        if (!res.ok || res.body === null) throw new Error(`stream: HTTP ${res.status}`);
        const parser = createParser({
          onEvent: (m) => {
            const event = m.event ?? "message";
            const parsed: unknown = JSON.parse(m.data);
            if (event === "message") afterId = (parsed as { id: string }).id;
            onEvent(event, parsed, m.id);
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await readWithin(reader, STREAM_IDLE_MS);
          if (done) break;
          parser.feed(value);
          pause = STREAM_RETRY_MIN_MS; // it works again
        }
      } catch {
        // dropped or refused: retry below unless stopped
      }
      if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, STREAM_RETRY_MAX_MS);
    }
  };
  void run();
  return () => abort.abort();
}
