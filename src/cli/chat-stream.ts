// A chat's event stream (`GET /api/v1/chats/{id}/stream`, or the one a new chat's create
// answers with) as a sequence of events, parsed by eventsource-parser. A dropped connection is
// opened again from the last committed message it delivered (`after_id`), so no message is lost
// or repeated; a few failed reconnects in a row, a missing chat and a refused token end it with a
// CliError in words.

import type { ChatClient } from "./chat-client.ts";
import { CliError, tokenRefused, unreachable } from "./chat-errors.ts";
import { sseEvents, type ChatEvent } from "./sse-events.ts";

export type { ChatEvent } from "./sse-events.ts";

/** Reconnects after a drop, in a row, before the stream gives up. */
export const STREAM_RECONNECTS = 5;
/** The pause before a reconnect. */
export const STREAM_RECONNECT_PAUSE_MS = 1_000;

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
): AsyncGenerator<ChatEvent> {
  let failures = 0;
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
        if (++failures > STREAM_RECONNECTS) throw unreachable(c.server, err);
        await pause(signal);
        continue;
      }
      if (res.status === 401) throw tokenRefused();
      if (res.status === 404) throw new CliError(`Chat ${chatId} not found on ${c.server}.`);
      if (!res.ok || res.body === null) {
        if (++failures > STREAM_RECONNECTS)
          throw new CliError(`The server answered the chat's stream with ${res.status}.`);
        await pause(signal);
        continue;
      }
      events = sseEvents(res.body);
    }
    try {
      for await (const e of events) {
        failures = 0;
        if (e.event === "message") afterId = (e.data as { id: string }).id;
        yield e;
      }
    } catch (err) {
      if (signal.aborted) return;
      if (++failures > STREAM_RECONNECTS) throw unreachable(c.server, err);
    }
    if (signal.aborted) return;
    await pause(signal);
  }
}

function pause(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, STREAM_RECONNECT_PAUSE_MS);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}
