// The one place the UI talks to the server. Until browser sessions (an HttpOnly cookie and a
// CSRF header) land, the token from sign-in/setup is kept in memory and sessionStorage and sent
// as a bearer header: switching to the cookie changes only `authHeaders` (and `credentials`).

const TOKEN_KEY = "tether.token";
let token: string | null = sessionStorage.getItem(TOKEN_KEY);

export function signedIn(): boolean {
  return token !== null;
}

export function setToken(t: string | null): void {
  token = t;
  if (t === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, t);
}

function authHeaders(): Record<string, string> {
  return token === null ? {} : { authorization: `Bearer ${token}` };
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
      ...authHeaders(),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  const data: unknown = text === "" ? undefined : JSON.parse(text);
  if (!res.ok) {
    const e = (data ?? {}) as { message?: string; detail?: string };
    // A token the server no longer knows (revoked, or a new database): back to sign-in.
    if (res.status === 401 && token !== null) {
      setToken(null);
      location.assign("/");
    }
    throw new ApiError(res.status, e.message ?? `HTTP ${res.status}`, e.detail);
  }
  return data as T;
}

export type StreamHandler = (event: string, data: unknown, id: string | undefined) => void;

/**
 * Follows a chat's SSE stream (`fetch`, because EventSource cannot send a bearer header), and
 * reconnects after a drop from the last committed message it saw. Returns the stop function.
 */
export function followStream(chatId: string, onEvent: StreamHandler): () => void {
  const abort = new AbortController();
  let afterId: string | undefined;
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const q = afterId === undefined ? "" : `?after_id=${encodeURIComponent(afterId)}`;
        const res = await fetch(`/api/v1/chats/${chatId}/stream${q}`, {
          headers: authHeaders(),
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
