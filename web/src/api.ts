// The one place the UI talks to the server. It is signed in by the session cookie the server
// sets at login (HttpOnly, so a script injected later cannot read it; the UI never keeps the
// token its login answers, nor sends it itself); every request carries the CSRF
// header the server asks of cookie-authenticated requests. A 401 means the session is gone
// (signed out elsewhere, revoked, expired): the listeners show the sign-in page.

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
    readonly detail?: string,
  ) {
    super(message);
  }
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
  const data: unknown = text === "" ? undefined : JSON.parse(text);
  if (!res.ok) {
    const e = (data ?? {}) as { message?: string; detail?: string };
    if (res.status === 401) signedOutListeners.forEach((fn) => fn());
    throw new ApiError(res.status, e.message ?? `HTTP ${res.status}`, e.detail);
  }
  return data as T;
}

export type StreamHandler = (event: string, data: unknown, id: string | undefined) => void;

/**
 * Follows a chat's SSE stream and reconnects after a drop from the last committed message it
 * saw (`fetch` rather than EventSource, which retries by itself from the start and cannot say
 * why it failed). Returns the stop function.
 */
export function followStream(chatId: string, onEvent: StreamHandler): () => void {
  const abort = new AbortController();
  let afterId: string | undefined;
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const q = afterId === undefined ? "" : `?after_id=${encodeURIComponent(afterId)}`;
        const res = await fetch(`/api/v1/chats/${chatId}/stream${q}`, {
          headers: CSRF,
          signal: abort.signal,
        });
        if (!res.ok || res.body === null) throw new Error(`stream: HTTP ${res.status}`);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let end: number;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let event = "message";
            let id: string | undefined;
            const data: string[] = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) event = line.slice(7);
              else if (line.startsWith("id: ")) id = line.slice(4);
              else if (line.startsWith("data: ")) data.push(line.slice(6));
            }
            if (data.length === 0) continue; // a heartbeat comment
            const parsed: unknown = JSON.parse(data.join("\n"));
            if (event === "message") afterId = (parsed as { id: string }).id;
            onEvent(event, parsed, id);
          }
        }
      } catch {
        // dropped or refused: retry below unless stopped
      }
      if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void run();
  return () => abort.abort();
}
