// A chat stream's events as they go out (text/event-stream): held together, each at most a
// frame, so a burst of them is one write. A model streams a few characters a part and a step
// commits a message or two, and each write wakes the reader (a browser, or a CLI sharing the
// machine with the server and its database). What a reader acts on goes out at once (flush).

import type { LongResponse } from "./long-response.ts";

/** A stream's events wait at most this long for the ones after them (a frame at 60 Hz). */
export const STREAM_FLUSH_MS = 16;

/** The SSE form of one event. */
export function sseEvent(event: string, data: unknown, eventId?: string): string {
  return `event: ${event}\n${eventId ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(data)}\n\n`;
}

export class SseBatch {
  #held: string;
  #timer: NodeJS.Timeout | undefined;

  /** Writes to `out`; `opening` (events already formed) goes out with the first write. */
  constructor(
    private readonly out: LongResponse,
    private readonly flushMs = STREAM_FLUSH_MS,
    opening = "",
  ) {
    this.#held = opening;
    out.onClose(() => clearTimeout(this.#timer));
  }

  /** Holds `chunk` for the next write: at the latest `flushMs` after the first held. */
  hold(chunk: string): void {
    this.#held += chunk;
    this.#timer ??= setTimeout(() => this.flush(), this.flushMs);
  }

  /** Writes everything held, in order. */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#held === "" || this.out.closed) return;
    const chunk = this.#held;
    this.#held = "";
    this.out.write(chunk);
  }
}
