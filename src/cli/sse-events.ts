// An event stream's body (text/event-stream) as the events in it, parsed by eventsource-parser.

import { createParser } from "eventsource-parser";

export interface ChatEvent {
  event: string;
  data: unknown;
}

/** An event stream's body as events, parsed as it arrives; leaving it early closes the body. */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatEvent> {
  const events: ChatEvent[] = [];
  const parser = createParser({
    onEvent: (m) => events.push({ event: m.event ?? "message", data: JSON.parse(m.data) }),
  });
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    parser.feed(chunk);
    for (let e = events.shift(); e !== undefined; e = events.shift()) yield e;
  }
}
