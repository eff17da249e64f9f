// Helpers for the API's tests: an API on a test database with its first user (the owner) and a
// member, JSON requests through Fastify's inject, and an SSE reader over real HTTP that
// collects events until the test has what it waits for.

import http from "node:http";
import { createParser } from "eventsource-parser";
import type { FastifyInstance } from "fastify";
import type { Database, Queryable } from "../chatd/db/index.ts";
import { MessageFeed } from "../chatd/message-feed.ts";
import type { MessagePart } from "../chatd/messages.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { createApi } from "./app.ts";
import type { ApiOptions } from "./context.ts";

export interface JsonAnswer {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, unknown>;
}

export interface TestApi {
  app: FastifyInstance;
  buffer: StreamBuffer;
  /** The API's feed: a worker in the same process shares it, as a server's does. */
  feed: MessageFeed;
  adminToken: string;
  adminId: string;
  memberToken: string;
  memberId: string;
  request(
    method: string,
    url: string,
    o?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<JsonAnswer>;
  /** Every JSON answer so far, as sent (tests assert no secret is in any of them). */
  answers: string[];
}

export async function startTestApi(db: Database, o: Partial<ApiOptions> = {}): Promise<TestApi> {
  const buffer = new StreamBuffer();
  const feed = o.feed ?? new MessageFeed();
  const app = await createApi({ db, buffer, ...o, feed });
  const answers: string[] = [];
  const request: TestApi["request"] = async (method, url, r = {}) => {
    const res = await app.inject({
      method: method as "GET",
      url,
      headers: {
        ...(r.token !== undefined && { authorization: `Bearer ${r.token}` }),
        ...r.headers,
      },
      ...(r.body !== undefined && { payload: r.body as object }),
    });
    answers.push(res.body);
    const body = res.body === "" ? {} : res.json<Record<string, unknown>>();
    return { status: res.statusCode, body, headers: res.headers };
  };
  const first = await request("POST", "/api/v1/users/first", {
    body: { email: "admin@example.com", password: "correct horse", name: "Ada" },
  });
  if (first.status !== 201) throw new Error(`first user: ${first.status}`);
  const adminToken = first.body.token as string;
  const member = await request("POST", "/api/v1/users", {
    token: adminToken,
    body: { email: "member@example.com", password: "member password", role: "member" },
  });
  const login = await request("POST", "/api/v1/auth/login", {
    body: { email: "member@example.com", password: "member password" },
  });
  return {
    app,
    feed,
    buffer,
    adminToken,
    adminId: (first.body.user as { id: string }).id,
    memberToken: login.body.token as string,
    memberId: member.body.id as string,
    request,
    answers,
  };
}

export interface SseEvent {
  event: string;
  id?: string;
  data: unknown;
}

export interface SseReader {
  status: number;
  headers: http.IncomingHttpHeaders;
  events: SseEvent[];
  /** Resolves with every event so far once `done(events)` holds; rejects after `timeoutMs`. */
  until(done: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  close(): void;
}

/** Opens `path` on a listening API and parses the event stream as it arrives. */
export function openSse(
  baseUrl: string,
  path: string,
  token: string,
  /** POSTed as JSON, asking for an event stream (a chat's create); else a GET. */
  body?: unknown,
): Promise<SseReader> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, baseUrl), {
      method: body === undefined ? "GET" : "POST",
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined && {
          accept: "text/event-stream",
          "content-type": "application/json",
        }),
      },
      agent: false,
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
    req.on("response", (res) => {
      const events: SseEvent[] = [];
      const waiters = new Set<() => void>();
      const parser = createParser({
        onEvent: (m) => {
          const e: SseEvent = { event: m.event ?? "message", data: JSON.parse(m.data) };
          if (m.id !== undefined) e.id = m.id;
          events.push(e);
        },
      });
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        parser.feed(chunk);
        for (const w of [...waiters]) w();
      });
      res.on("error", () => {});
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        until: (done, timeoutMs = 5_000) =>
          new Promise((ok, fail) => {
            const check = (): void => {
              if (!done(events)) return;
              waiters.delete(check);
              clearTimeout(timer);
              ok([...events]);
            };
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`SSE: timed out; events so far: ${JSON.stringify(events)}`));
            }, timeoutMs);
            waiters.add(check);
            check();
          }),
        close: () => req.destroy(),
      });
    });
  });
}

/** Inserts a message as chatd's worker would have committed it. */
export async function insertMessage(
  q: Queryable,
  chatId: string,
  m: {
    role: string;
    visibility: string;
    content: MessagePart[];
    runtime_ms?: number;
    deleted?: boolean;
    tokens?: [number, number];
    cost?: number;
  },
): Promise<string> {
  const r = await q.query<{ id: string }>(
    `INSERT INTO chat_messages (chat_id, role, visibility, content, runtime_ms, deleted, input_tokens, output_tokens, cost_micros)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
    [
      chatId,
      m.role,
      m.visibility,
      JSON.stringify(m.content),
      m.runtime_ms ?? 0,
      m.deleted ?? false,
      m.tokens?.[0] ?? 0,
      m.tokens?.[1] ?? 0,
      m.cost ?? 0,
    ],
  );
  return r.rows[0]!.id;
}
