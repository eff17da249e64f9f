// The HTTP side of `tether chat`: JSON requests to the server's API, the server's errors in
// words (a server that is down and a refused token are one-line CliErrors), and what a session
// sends: a message to a new chat or a given one, answered with where its answer starts.

import { tokenRefused, unreachable } from "./chat-errors.ts";

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
  let res: Response;
  try {
    res = await fetch(new URL(route, server), {
      method,
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { "content-type": "application/json" }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  } catch (err) {
    throw unreachable(server, err);
  }
  const text = await res.text();
  if (!res.ok) {
    if (res.status === 401 && token) throw tokenRefused();
    let message = text;
    try {
      const e = JSON.parse(text) as { message?: string; detail?: string };
      message = [e.message ?? text, e.detail].filter(Boolean).join(" ");
    } catch {
      // keep the raw text
    }
    throw new ApiError(res.status, `${message} (${method} ${route}: ${res.status})`);
  }
  return (text ? JSON.parse(text) : undefined) as T;
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
  const chat = await api<{ id: string }>(c.server, c.token, "POST", "/api/v1/chats", {
    message: text,
    ...(c.workspaceId && { workspace_id: c.workspaceId }),
  });
  const msgs = await api<{ messages: ApiMessage[] }>(
    c.server,
    c.token,
    "GET",
    `/api/v1/chats/${chat.id}/messages`,
  );
  return { chatId: chat.id, afterId: msgs.messages[0]?.id, queued: false };
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
