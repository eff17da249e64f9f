// The HTTP side of `tether chat`: JSON requests to the server's API, the server's errors in
// words (a server that is down and a refused token are one-line CliErrors), and what a session
// sends: a message to a new chat or a given one, answered with where its answer starts.

import { CliError, tokenRefused, unreachable } from "./chat-errors.ts";
import { sseEvents, type ChatEvent } from "./sse-events.ts";

export interface ApiMessage {
  id: string;
  role: string;
  parts: {
    type: string;
    text?: string;
    tool_call_id?: string;
    tool_name?: string;
    args?: unknown;
    result?: unknown;
    /** A compaction boundary's summary (docs/prompt.md). */
    summary?: string;
    messages_compacted?: number;
  }[];
  boundary?: true;
}

/** The server answered with an error status; the message is its own, with the route. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One JSON request. No answer at all (the server is down) and a refused token are CliErrors
 * in words; any other error status an ApiError with the server's message and detail.
 */
export async function api<T>(
  server: string,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<T> {
  const text = await (await request(server, token, method, route, body)).text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** One request, its answer unread unless it has an error status (then thrown, as api's). */
async function request(
  server: string,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
  accept?: string,
): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(new URL(route, server), {
      method,
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { "content-type": "application/json" }),
        ...(accept && { accept }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  } catch (err) {
    throw unreachable(server, err);
  }
  if (!res.ok) throw refusal(res, await res.text(), token, `${method} ${route}`);
  return res;
}

/** The error an answer with an error status is: a refused token, else the server's message. */
function refusal(res: Response, text: string, token: string | undefined, what: string): Error {
  if (res.status === 401 && token) return tokenRefused();
  let message = text;
  try {
    const e = JSON.parse(text) as { message?: string; detail?: string };
    message = [e.message ?? text, e.detail].filter(Boolean).join(" ");
  } catch {
    // keep the raw text
  }
  return new ApiError(res.status, `${message} (${what}: ${res.status})`);
}

/** Where a chat and a token are: every request of a session carries both. */
export interface ChatClient {
  server: string;
  token: string;
  /** A new chat's workspace (default: the server's default workspace). */
  workspaceId?: string;
}

export interface Sent {
  chatId: string;
  /** The stream starts after this message: the answer follows it. */
  afterId: string | undefined;
  /** The chat was busy: the message waits in its queue. */
  queued: boolean;
  /** A new chat's stream, open from after our message (its create answered with it). */
  events?: AsyncGenerator<ChatEvent>;
}

/**
 * Sends `text` to chat `chatId`, or to a new chat. The stream starts after our own message (or,
 * when it is queued, after what the chat held when we sent it), so it shows the whole answer
 * even if part of it is already committed.
 */
export async function sendMessage(
  c: ChatClient,
  chatId: string | undefined,
  text: string,
): Promise<Sent> {
  if (chatId) {
    const before = await api<{ messages: ApiMessage[] }>(
      c.server,
      c.token,
      "GET",
      `/api/v1/chats/${chatId}/messages`,
    );
    const sent = await api<{ message_id?: string; queued: boolean }>(
      c.server,
      c.token,
      "POST",
      `/api/v1/chats/${chatId}/messages`,
      { text },
    );
    return { chatId, afterId: sent.message_id ?? before.messages.at(-1)?.id, queued: sent.queued };
  }
  return createChat(c, text);
}

/**
 * A new chat with `text` as its first message, in one request: the create answers with the
 * chat's event stream (`Accept: text/event-stream`), which opens with the chat, then our message.
 */
async function createChat(c: ChatClient, text: string): Promise<Sent> {
  const route = "/api/v1/chats";
  const body = { message: text, ...(c.workspaceId && { workspace_id: c.workspaceId }) };
  const res = await request(c.server, c.token, "POST", route, body, "text/event-stream");
  if (res.body === null || !res.headers.get("content-type")?.startsWith("text/event-stream")) {
    // A server from before the create could answer with a stream: its JSON answer.
    const chat = JSON.parse(await res.text()) as { id: string };
    const msgs = await api<{ messages: ApiMessage[] }>(
      c.server,
      c.token,
      "GET",
      `/api/v1/chats/${chat.id}/messages`,
    );
    return { chatId: chat.id, afterId: msgs.messages[0]?.id, queued: false };
  }
  const events = sseEvents(res.body);
  const opening = await events.next();
  if (opening.done || opening.value.event !== "chat")
    throw new CliError(`The server's answer to POST ${route} did not start with the chat.`);
  const chatId = (opening.value.data as { id: string }).id;
  // Then the chat's first message, ours; the answer follows it.
  const own = await events.next();
  if (own.done) return { chatId, afterId: undefined, queued: false };
  if (own.value.event === "message")
    return { chatId, afterId: (own.value.data as { id: string }).id, queued: false, events };
  return { chatId, afterId: undefined, queued: false, events: prefixed(own.value, events) };
}

async function* prefixed<T>(first: T, rest: AsyncGenerator<T>): AsyncGenerator<T> {
  yield first;
  yield* rest;
}

/** Asks the chat to stop its turn (a running command is killed and shown canceled). */
export function interruptChat(c: ChatClient, chatId: string): Promise<unknown> {
  return api(c.server, c.token, "POST", `/api/v1/chats/${chatId}/interrupt`);
}

export interface ChatState {
  status: "waiting" | "running" | "interrupting" | "error";
  last_error?: { message: string; detail?: string };
  retrying?: Retrying | null;
}

/** The chat's retrying field (pinned in issue 14): the model or an agent keeps failing. */
export interface Retrying {
  attempt: number;
  last_error: string;
  next_attempt_at: string;
}

export function readChat(c: ChatClient, chatId: string): Promise<ChatState> {
  return api<ChatState>(c.server, c.token, "GET", `/api/v1/chats/${chatId}`);
}
