// An event stream's body (text/event-stream) as the events in it, parsed by eventsource-parser.
// A stream that sends nothing for STREAM_IDLE_MS is taken as gone: the server writes a
// heartbeat every 15 s (api/stream.ts), and a connection a sleeping laptop or a lost route left
// open would otherwise be waited on for fetch's body timeout, five minutes (measured on Node 20).

import { createParser } from "eventsource-parser";

export interface ChatEvent {
  event: string;
  data: unknown;
}

/** No event and no heartbeat for this long: the stream is gone (three heartbeats missed). */
export const STREAM_IDLE_MS = 45_000;

/** The stream sent nothing for `idleMs`: it was closed, and a reader may open it again. */
export class StreamIdleError extends Error {
  constructor(idleMs: number) {
    super(`The server sent nothing on the chat's stream for ${idleMs / 1000} s.`);
    this.name = "StreamIdleError";
  }
}

/**
 * An event stream's body as events, parsed as it arrives; leaving it early, or sending nothing
 * for `idleMs` (StreamIdleError), closes the body. `onBytes` hears of every chunk, heartbeats
 * included: the stream is alive.
 */
export async function* sseEvents(
  body: ReadableStream<Uint8Array>,
  idleMs = STREAM_IDLE_MS,
  onBytes?: () => void,
): AsyncGenerator<ChatEvent> {
  const events: ChatEvent[] = [];
  const parser = createParser({
    onEvent: (m) => events.push({ event: m.event ?? "message", data: JSON.parse(m.data) }),
  });
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await within(reader.read(), idleMs);
      if (done) return;
      onBytes?.();
      parser.feed(value);
      for (let e = events.shift(); e !== undefined; e = events.shift()) yield e;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** `read`, or StreamIdleError once `ms` passed without it. */
function within<T>(read: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const idle = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StreamIdleError(ms)), ms);
  });
  return Promise.race([read, idle]).finally(() => clearTimeout(timer));
}
