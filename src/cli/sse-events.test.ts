import { describe, expect, it } from "vitest";
import { sseEvents, StreamIdleError } from "./sse-events.ts";

/** A body that sends `chunks` and then stays open, sending nothing; `canceled` once closed. */
function stalledBody(chunks: string[]) {
  const state = { canceled: false };
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
    },
    cancel() {
      state.canceled = true;
    },
  });
  return { body, state };
}

describe("sseEvents", () => {
  it("heartbeats keep a quiet stream open past the idle time", async () => {
    // Six heartbeats 20 ms apart, then an event: 120 ms in all against an idle time of 60.
    const encoder = new TextEncoder();
    let beats = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        await new Promise((r) => setTimeout(r, 20));
        c.enqueue(
          encoder.encode(
            ++beats <= 6 ? ": heartbeat\n\n" : 'event: status\ndata: {"status":"waiting"}\n\n',
          ),
        );
      },
    });
    const events = sseEvents(body, 60);
    expect((await events.next()).value).toEqual({ event: "status", data: { status: "waiting" } });
    expect(beats).toBe(7);
    await events.return(undefined);
  });

  it("a stream that sends nothing, not even a heartbeat, for the idle time is closed", async () => {
    const { body, state } = stalledBody([
      'event: message\ndata: {"id":"1"}\n\n',
      ": heartbeat\n\n",
    ]);
    const events = sseEvents(body, 50);
    expect((await events.next()).value).toEqual({ event: "message", data: { id: "1" } });
    await expect(events.next()).rejects.toBeInstanceOf(StreamIdleError);
    expect(state.canceled).toBe(true);
  });
});
