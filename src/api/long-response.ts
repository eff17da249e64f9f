// A response that stays open (the SSE chat stream, the replicas' parts feed): hijacked from
// Fastify, ended by the client leaving, by the API closing (ctx.streams), or by a client that
// lets too much pile up unread; a heartbeat line keeps proxies and readers sure it is alive.

import type { ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import type { ApiContext } from "./context.ts";

export interface LongResponse {
  readonly closed: boolean;
  /** Writes `chunk`, unless closed; a reader too far behind is cut off (it reconnects). */
  write(chunk: string): void;
  /** Runs `fn` once when the response closes, whatever closes it. */
  onClose(fn: () => void): void;
  close(): void;
}

export function openLongResponse(
  ctx: ApiContext,
  reply: FastifyReply,
  o: {
    /** The answer's status (200 unless given). */
    status?: number;
    headers: Record<string, string>;
    heartbeatMs: number;
    heartbeat: string;
    maxBufferedBytes: number;
  },
): LongResponse {
  reply.hijack();
  const res: ServerResponse = reply.raw;
  // The headers set on the reply before it was hijacked (the security headers) go out too.
  const set: Record<string, string> = {};
  for (const [n, v] of Object.entries(reply.getHeaders())) if (typeof v === "string") set[n] = v;
  res.writeHead(o.status ?? 200, { ...set, ...o.headers });
  let closed = false;
  // The head goes out with the first write when that comes in this turn of the event loop (one
  // packet, one wake-up of the reader), else on its own: the reader knows it is connected.
  let wrote = false;
  setImmediate(() => {
    if (!wrote && !closed) res.flushHeaders();
  });
  const cleanups: (() => void)[] = [];
  const close = (): void => {
    if (closed) return;
    closed = true;
    for (const c of cleanups.splice(0)) c();
    ctx.streams.delete(close);
    res.end();
  };
  const write = (chunk: string): void => {
    if (closed) return;
    wrote = true;
    res.write(chunk);
    if (res.writableLength > o.maxBufferedBytes) close();
  };
  const heartbeat = setInterval(() => write(o.heartbeat), o.heartbeatMs);
  cleanups.push(() => clearInterval(heartbeat));
  // Last: a response closed here runs every clean-up above (the heartbeat's too).
  ctx.streams.add(close);
  res.on("close", close);
  if (reply.request.raw.socket.destroyed) close(); // gone before the listener was attached
  return {
    get closed() {
      return closed;
    },
    write,
    onClose: (fn) => {
      if (closed) fn();
      else cleanups.push(fn);
    },
    close,
  };
}
