import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { CliError } from "./chat-errors.ts";
import { chatEvents, type Reconnect } from "./chat-stream.ts";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A server that answers its n-th request (from 1) with `answer(n, req, res)`; its URLs seen. */
async function server(answer: (n: number, req: IncomingMessage, res: ServerResponse) => void) {
  const urls: string[] = [];
  const srv = createServer((req, res) => {
    urls.push(req.url!);
    answer(urls.length, req, res);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  closers.push(() => {
    srv.closeAllConnections();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, urls };
}

const sse = (res: ServerResponse, ...events: string[]) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const e of events) res.write(e);
};

const quick = (o: Partial<Reconnect> = {}): Reconnect => ({
  pauseMs: 5,
  maxPauseMs: 20,
  giveUpMs: 10_000,
  ...o,
});

async function collect(gen: AsyncGenerator<{ event: string; data: unknown }>, until: string) {
  const seen: { event: string; data: unknown }[] = [];
  for await (const e of gen) {
    seen.push(e);
    if (e.event === until) break;
  }
  return seen;
}

describe("a chat's stream", () => {
  it("a drop reopens from the last message, through failed attempts, and is told once", async () => {
    const s = await server((n, _req, res) => {
      if (n === 1) {
        sse(res, 'event: message\ndata: {"id":"7"}\n\n');
        setTimeout(() => res.socket?.destroy(), 20); // dropped mid-stream
      } else if (n <= 3) {
        res.writeHead(502).end();
      } else {
        sse(res, 'event: status\ndata: {"status":"waiting"}\n\n');
      }
    });
    const drops: unknown[] = [];
    const c = { server: s.url, token: "t" };
    const events = chatEvents(c, "chat-1", undefined, new AbortController().signal, undefined, {
      ...quick(),
      onDrop: (err) => drops.push(err),
    });
    expect(await collect(events, "status")).toEqual([
      { event: "message", data: { id: "7" } },
      { event: "status", data: { status: "waiting" } },
    ]);
    expect(s.urls).toEqual([
      "/api/v1/chats/chat-1/stream",
      ...Array(3).fill("/api/v1/chats/chat-1/stream?after_id=7"),
    ]);
    expect(drops).toHaveLength(1);
  });

  it("a connection that stays up on heartbeats ends the drop before it: the next one starts anew", async () => {
    const s = await server((n, _req, res) => {
      if (n === 2) return res.writeHead(502).end();
      if (n === 4) return sse(res, 'event: status\ndata: {"status":"waiting"}\n\n');
      // 1: an event, then dropped; 3: up on heartbeats alone, past the give-up time, then dropped.
      sse(res, n === 1 ? 'event: message\ndata: {"id":"1"}\n\n' : ": heartbeat\n\n");
      const beat = setInterval(() => res.write(": heartbeat\n\n"), 20);
      setTimeout(
        () => {
          clearInterval(beat);
          res.socket?.destroy();
        },
        n === 1 ? 20 : 300,
      );
    });
    const drops: unknown[] = [];
    const signal = new AbortController().signal;
    const events = chatEvents({ server: s.url, token: "t" }, "c", undefined, signal, undefined, {
      ...quick({ giveUpMs: 150 }),
      onDrop: (err) => drops.push(err),
    });
    expect((await collect(events, "status")).map((e) => e.event)).toEqual(["message", "status"]);
    expect(s.urls).toHaveLength(4);
    expect(drops).toHaveLength(2);
  });

  it("gives up once the drop is older than its limit, saying what the server answered", async () => {
    const s = await server((n, _req, res) => {
      if (n > 1) return res.writeHead(503).end();
      sse(res, 'event: message\ndata: {"id":"1"}\n\n');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const c = { server: s.url, token: "t" };
    const signal = new AbortController().signal;
    const events = chatEvents(c, "c", undefined, signal, undefined, quick({ giveUpMs: 60 }));
    await expect(collect(events, "status")).rejects.toThrow(
      new CliError("The server answered the chat's stream with 503."),
    );
    expect(s.urls.length).toBeGreaterThan(2);
  });

  it("a missing chat and a refused token end it at once", async () => {
    for (const [status, said] of [
      [404, "Chat c not found on"],
      [401, "The server refused the token (401)"],
    ] as const) {
      const s = await server((_n, _req, res) => res.writeHead(status).end());
      const events = chatEvents(
        { server: s.url, token: "t" },
        "c",
        undefined,
        new AbortController().signal,
        undefined,
        quick(),
      );
      await expect(collect(events, "status")).rejects.toThrow(said);
      expect(s.urls).toHaveLength(1);
    }
  });
});
