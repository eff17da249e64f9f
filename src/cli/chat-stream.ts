// A chat's event stream (`GET /api/v1/chats/{id}/stream`, or the one a new chat's create
// answers with) as a sequence of events, parsed by eventsource-parser. A dropped connection is
// opened again from the last committed message it delivered (`after_id`), so no message is lost
// or repeated: after a pause that doubles from 1 s to 10 s while attempts fail, for two minutes
// from the drop — long enough for a server's restart or a laptop's network coming back after
// sleep. A missing chat and a refused token end it at once with a CliError in words.

import type { ChatClient } from "./chat-client.ts";
import { CliError, tokenRefused, unreachable } from "./chat-errors.ts";
import { sseEvents, type ChatEvent } from "./sse-events.ts";

export type { ChatEvent } from "./sse-events.ts";

/** How the stream reopens after a drop (tests make it quick). */
export interface Reconnect {
  /** The first pause; each failed attempt doubles it, up to `maxPauseMs`. */
  pauseMs: number;
  maxPauseMs: number;
  /** How long after the drop the stream gives up (CliError: the server cannot be reached). */
  giveUpMs: number;
  /** Told once a drop begins, with what went wrong (not at a clean end). */
  onDrop?: (err: unknown) => void;
}

export const STREAM_RECONNECT: Reconnect = {
  pauseMs: 1_000,
  maxPauseMs: 10_000,
  giveUpMs: 120_000,
};

/**
 * The events of chat `chatId` after message `afterId`, until `signal` aborts or the caller stops.
 * `opened` is a stream already open on the chat from there (a new chat's, chat-client.ts); the
 * events go on from a reconnect when it drops.
 */
export async function* chatEvents(
  c: ChatClient,
  chatId: string,
  afterId: string | undefined,
  signal: AbortSignal,
  opened?: AsyncGenerator<ChatEvent>,
  r: Reconnect = STREAM_RECONNECT,
): AsyncGenerator<ChatEvent> {
  /** When the stream dropped, while it is down; the next pause. */
  let droppedAt: number | undefined;
  let pauseMs = r.pauseMs;
  /** Bytes came (an event, a heartbeat): the stream is up, and a later drop is a new one. */
  const alive = (): void => {
    droppedAt = undefined;
    pauseMs = r.pauseMs;
  };
  /** A failed attempt: gives up past the deadline, else waits and doubles the next wait. */
  const failed = async (err: unknown): Promise<void> => {
    if (droppedAt === undefined) {
      droppedAt = Date.now();
      r.onDrop?.(err);
    } else if (Date.now() - droppedAt >= r.giveUpMs) {
      throw err instanceof CliError ? err : unreachable(c.server, err);
    }
    await pause(pauseMs, signal);
    pauseMs = Math.min(pauseMs * 2, r.maxPauseMs);
  };
  for (;;) {
    let events = opened;
    opened = undefined;
    if (!events) {
      const q = afterId ? `?after_id=${encodeURIComponent(afterId)}` : "";
      let res: Response;
      try {
        res = await fetch(new URL(`/api/v1/chats/${chatId}/stream${q}`, c.server), {
          headers: { authorization: `Bearer ${c.token}` },
          signal,
        });
      } catch (err) {
        if (signal.aborted) return;
        await failed(err);
        continue;
      }
      if (res.status === 401) throw tokenRefused();
      if (res.status === 404) throw new CliError(`Chat ${chatId} not found on ${c.server}.`);
      if (!res.ok || res.body === null) {
        await res.body?.cancel();
        await failed(new CliError(`The server answered the chat's stream with ${res.status}.`));
        continue;
      }
      events = sseEvents(res.body, undefined, alive);
    }
    try {
      for await (const e of events) {
        alive();
        if (e.event === "message") afterId = (e.data as { id: string }).id;
        yield e;
      }
    } catch (err) {
      if (signal.aborted) return;
      await failed(err);
      continue;
    }
    if (signal.aborted) return;
    await pause(r.pauseMs, signal); // a clean end: the server closed it (a restart, a drain)
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
