// A chat's event stream (`GET /api/v1/chats/{id}/stream`) as a sequence of events, parsed by
// eventsource-parser. A dropped connection is opened again from the last committed message it
// delivered (`after_id`), so no message is lost or repeated; a few failed reconnects in a row,
// a missing chat and a refused token end it with a CliError in words.

import { createParser } from "eventsource-parser";
import type { ChatClient } from "./chat-client.ts";
import { CliError, tokenRefused, unreachable } from "./chat-errors.ts";

export interface ChatEvent {
  event: string;
  data: unknown;
}

/** Reconnects after a drop, in a row, before the stream gives up. */
export const STREAM_RECONNECTS = 5;
/** The pause before a reconnect. */
export const STREAM_RECONNECT_PAUSE_MS = 1_000;

export async function* chatEvents(
  c: ChatClient,
  chatId: string,
  afterId: string | undefined,
  signal: AbortSignal,
): AsyncGenerator<ChatEvent> {
  let failures = 0;
  for (;;) {
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
    const events: ChatEvent[] = [];
    const parser = createParser({
      onEvent: (m) => events.push({ event: m.event ?? "message", data: JSON.parse(m.data) }),
    });
    try {
      for await (const chunk of res.body.pipeThrough(new TextDecoderStream())) {
        parser.feed(chunk);
        failures = 0;
        for (let e = events.shift(); e !== undefined; e = events.shift()) {
          if (e.event === "message") afterId = (e.data as { id: string }).id;
          yield e;
        }
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
