// A chat's event stream (SSE): the committed messages after `after_id`, then live parts, new
// messages and status changes. Changes are subscribed before history is read, so no commit
// falls in between; one refresh runs at a time, so each message goes out once, in ID order.
// The first refresh reads the chat (checked for access first) and its messages in one
// statement (a chat just created and claimed here starts from the create's answer); later, a
// commit this replica made comes from its feed (chatd/message-feed.ts) when the stream's
// messages are complete up to the history version it moved from, and anything else is read.
// Live parts come from this replica's buffer and, while another replica owns the chat, from
// that owner (relay.ts); the stream follows the owner the chat row names at each refresh.

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { rowToChat, type Chat, type ChatStatus } from "../chatd/chats.ts";
import {
  messagesFromJson,
  messagesJsonSql,
  rowToMessage,
  type ChatMessage,
} from "../chatd/messages.ts";
import type { PartEvent } from "../chatd/stream.ts";
import { usableBy } from "../chatd/workspace-access.ts";
import { loadChat, retryingOf, type ChatChange } from "../chatd/transitions/index.ts";
import type { ApiContext } from "./context.ts";
import { caller, isStaff } from "./auth.ts";
import { checkReadable } from "./chat-access.ts";
import { IdParams, Int64String, parse } from "./errors.ts";
import { OwnerRelay, PartCursor } from "./relay.ts";
import { openLongResponse, type LongResponse } from "./long-response.ts";
import { SseBatch, sseEvent } from "./sse-batch.ts";
import {
  isVisibleMessage,
  messageView,
  VISIBLE_MESSAGE_SQL,
  VISIBLE_MESSAGES_SQL,
} from "./views.ts";
import { watchWorkspace } from "./workspace-events.ts";

/** A comment line goes out this often, so proxies and clients see the stream is alive. */
export const SSE_HEARTBEAT_MS = 15_000;
/** A client that lets this much output pile up unread is cut off (it reconnects with after_id). */
export const SSE_MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export const StreamQuery = z.object({ after_id: Int64String.optional() });

const STREAM_LOST =
  "The stream lost the database; reconnect with after_id set to the last message ID.";

/**
 * What a stream shows of the chat, from a change's payload; undefined when the payload cannot
 * say (a retry state to show, or a payload without these fields): the stream reads the chat.
 */
function shownState(
  c: ChatChange,
):
  | Pick<Chat, "status" | "historyVersion" | "generationAttempt" | "workerId" | "retryState">
  | undefined {
  if (c.retry_state !== false || c.generation_attempt === undefined || c.worker_id === undefined)
    return undefined;
  return {
    status: c.status,
    historyVersion: c.history_version,
    generationAttempt: c.generation_attempt,
    workerId: c.worker_id,
    retryState: null,
  };
}

/**
 * The chat's row, the messages a person sees after `$2` (VISIBLE_MESSAGES_SQL's) and who may use
 * its workspace (usableBy's columns), in one statement.
 */
export const CHAT_WITH_VISIBLE_MESSAGES_SQL = `SELECT c.*,
  ${messagesJsonSql("c.id", `m.id > $2 AND ${VISIBLE_MESSAGE_SQL}`)} AS messages,
  (SELECT json_build_object('shared', w.shared, 'owner_id', w.owner_id) FROM workspaces w
   WHERE w.id = c.workspace_id) AS workspace_use
  FROM chats c WHERE c.id = $1`;

/** A workspace's columns that say who may use it (workspace-access.ts usableBy). */
interface WorkspaceUse {
  shared: boolean;
  owner_id: string | null;
}

/** The chat (undefined if there is none) and its visible messages after `afterId`, read at once. */
export async function readChatWithMessages(
  ctx: Pick<ApiContext, "db">,
  chatId: string,
  afterId: string,
): Promise<{
  chat: Chat | undefined;
  messages: ChatMessage[];
  /** Null without a workspace row. */
  workspace: WorkspaceUse | null;
}> {
  const r = await ctx.db.query(CHAT_WITH_VISIBLE_MESSAGES_SQL, [chatId, afterId]);
  const row = r.rows[0];
  if (!row) return { chat: undefined, messages: [], workspace: null };
  return {
    chat: rowToChat(row),
    messages: messagesFromJson(row.messages),
    workspace: (row.workspace_use as WorkspaceUse | null) ?? null,
  };
}

/** `Last-Event-ID` (an EventSource reconnecting) stands in for a missing `after_id`. */
function lastEventId(header: string | string[] | undefined): string | undefined {
  const parsed = Int64String.safeParse(typeof header === "string" ? header.trim() : undefined);
  return parsed.success ? parsed.data : undefined;
}

export function streamRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/api/v1/chats/:id/stream", async (request, reply) => {
    const { id } = parse(IdParams, request.params, "path");
    const query = parse(StreamQuery, request.query, "query");
    const afterId = query.after_id ?? lastEventId(request.headers["last-event-id"]) ?? "0";
    await followChat(ctx, request, reply, { chatId: id, afterId });
  });
}

export interface Follow {
  chatId: string;
  /** The stream's messages are those after this one ("0": all). */
  afterId: string;
  /**
   * Events the stream opens with, before the chat's own (a new chat's `chat` event), and the
   * answer's status (default 200) and extra headers. With an opening, a failure to read the
   * chat is an `error` event in the open stream rather than an error answer: the chat exists.
   */
  opening?: { status: number; headers: Record<string, string>; events: string };
  /**
   * A chat the caller just made, claimed by this replica's worker, whose runner started in the
   * same turn of the event loop as this call: the chat and its visible messages as created,
   * which the stream starts from instead of reading them. Nobody knows the chat yet but that
   * runner, whose commits the stream's feed holds from this call on; and its creator may read
   * it and use its workspace (the create checked both).
   */
  created?: { chat: Chat; messages: ChatMessage[] };
}

/**
 * Answers `reply` with chat `chatId`'s event stream: the messages after `afterId`, then live
 * parts, messages and status changes, until the reader leaves. The caller may read the chat
 * (checked here, before anything is sent, unless the stream has an opening).
 */
export async function followChat(
  ctx: ApiContext,
  request: FastifyRequest,
  reply: FastifyReply,
  o: Follow,
): Promise<void> {
  const id = o.chatId;
  let lastId = o.afterId;
  let lastStatus: ChatStatus | undefined;
  /** The `retrying` last sent, as JSON (a status event goes out when either moves). */
  let lastRetrying: string | undefined;
  let started = false;
  let refreshing = false;
  let again = false;
  /**
   * The history version the messages sent are complete up to (one committed before they were
   * read, or the last held commit they came from), and the highest one a change announced:
   * messages are sent only when history moved, not for the other changes of a turn (an
   * attempt, a retry state, the owner).
   */
  let sentHistory: bigint | undefined;
  let announcedHistory = 0n;
  /** The newest change not refreshed from yet: what the stream shows is in its payload. */
  let latest: ChatChange | undefined;
  // Followed in the feed and subscribed before history is read: a commit after the read is
  // announced after it (and, made here, held). A change before the first refresh is covered.
  // Changes come as notifications, from this replica's runners (their fenced writes notify
  // nobody: message-feed.ts), and through the relay from the runner of another replica.
  const onChange = (change: ChatChange): void => {
    const v = BigInt(change.history_version);
    if (v > announcedHistory) announcedHistory = v;
    if (!latest || BigInt(change.snapshot_version) > BigInt(latest.snapshot_version))
      latest = change;
    if (started) void refresh();
  };
  const unwatchFeed = ctx.feed.watch(id);
  const unwatchOwn = ctx.feed.changes(id, onChange);
  const unwatch = (): void => {
    unwatchOwn();
    unwatchFeed();
  };
  const open = (): LongResponse =>
    openLongResponse(ctx, reply, {
      status: o.opening?.status ?? 200,
      headers: {
        ...o.opening?.headers,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      },
      heartbeatMs: SSE_HEARTBEAT_MS,
      heartbeat: ": heartbeat\n\n",
      maxBufferedBytes: SSE_MAX_BUFFERED_BYTES,
    });
  /** The chat, its messages after lastId, and whether its reader may use its workspace. */
  let read: { chat: Chat; messages: ChatMessage[]; workspaceUsable: boolean };
  let unsubscribeChanges: (() => void) | undefined;
  try {
    unsubscribeChanges = await ctx.changes.subscribe(id, onChange);
    // Read after subscribing, so the first refresh starts from it: a later commit is
    // announced. One statement: the chat (checked for access before anything is sent) and
    // its messages. A chat its caller just made here needs none: see Follow.created.
    if (o.created) read = { ...o.created, workspaceUsable: true };
    else {
      const r = await readChatWithMessages(ctx, id, lastId);
      read = {
        chat: await checkReadable(ctx, request, id, r.chat),
        messages: r.messages,
        // Who may use it was read with the chat (no statement of its own).
        workspaceUsable: r.workspace !== null && usableBy(caller(request).user.id, r.workspace),
      };
    }
  } catch (err) {
    unsubscribeChanges?.();
    unwatch();
    if (!o.opening) throw err;
    request.log.error({ err }, "chat stream start failed");
    const out = open();
    out.write(o.opening.events + sseEvent("error", { message: STREAM_LOST }));
    out.close();
    return;
  }
  const chat = read.chat;
  /** The chat and its messages as read above, for the first refresh (unless a change came since). */
  let first: { chat: Chat; messages: ChatMessage[] } | undefined = read;
  const out = open();
  out.onClose(unsubscribeChanges);
  out.onClose(unwatch);
  // Events go out together (sse-batch.ts), the opening with the first refresh's; a status
  // event takes everything before it out at once: it is what a reader acts on (the turn
  // ended, an interruption began).
  const batch = new SseBatch(out, ctx.streamFlushMs, o.opening?.events);
  const send = (event: string, data: unknown, eventId?: string): void => {
    batch.hold(sseEvent(event, data, eventId));
    if (event === "status" || event === "error") batch.flush();
  };
  // A template workspace's state as `workspace` events; the open stream is its activity. Only
  // while the reader may see the workspace: an admin, or the chat's owner while it is theirs
  // or shared (once unshared, its state is not theirs to follow, nor to keep running).
  const watched =
    chat.workspaceId !== null && (isStaff(caller(request).user) || read.workspaceUsable)
      ? chat.workspaceId
      : null;
  out.onClose(await watchWorkspace(ctx, watched, (e) => send("workspace", e)));
  const fail = (message: string): void => {
    send("error", { message });
    out.close();
  };
  // Every part, local or relayed, passes the cursor: none twice, none from a stale episode.
  const cursor = new PartCursor();
  const sendPart = (e: PartEvent): void => {
    if (!cursor.admit(e)) return;
    batch.hold(sseEvent("part", e));
  };
  /** The owner's parts while another replica owns the chat (set once the stream is open). */
  let relay: OwnerRelay | undefined;

  /** Sends those of `messages` (visible ones, in ID order) after the last one sent. */
  const sendMessages = (messages: ChatMessage[]): void => {
    for (const m of messages) {
      if (BigInt(m.id) <= BigInt(lastId)) continue;
      send("message", messageView(m), m.id);
      lastId = m.id;
    }
  };

  /**
   * Sends the messages of the held commits that moved history on from `from`, one after the
   * other (a commit under way on this replica is waited for, once, when they fall short of
   * `target`); answers the history version they reach. Each held commit's messages are all
   * those between its versions, and IDs increase in commit order, so none is skipped.
   */
  const fromFeed = async (from: bigint, target: bigint): Promise<bigint> => {
    const follow = (v: bigint): bigint => {
      for (let e = ctx.feed.from(id, v); e; e = ctx.feed.from(id, v)) {
        sendMessages(e.messages.filter((m) => isVisibleMessage(m)));
        v = e.after;
      }
      return v;
    };
    const reached = follow(from);
    if (reached >= target) return reached;
    const settling = ctx.feed.settled(id);
    if (!settling) return reached;
    await settling;
    return follow(reached);
  };

  /** Sends every committed message after the last one sent, then the status if it moved. */
  const refresh = async (): Promise<void> => {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      do {
        again = false;
        const change = latest;
        latest = undefined;
        const read = first;
        first = undefined;
        if (read) {
          // The first refresh: the messages came with the chat, in the same statement.
          sendMessages(read.messages);
          sentHistory = BigInt(read.chat.historyVersion);
        }
        // The chat's state first (the change's, else read): the messages read after it hold at
        // least its history version's.
        const known = change ? shownState(change) : read?.chat;
        const chat = known ?? (await loadChat(ctx.db, id));
        if (!chat) return fail("The chat was deleted.");
        const history = BigInt(chat.historyVersion);
        // Every version here was committed before this point (a notification is sent on
        // commit): a read from now on holds its messages.
        const target = history > announcedHistory ? history : announcedHistory;
        if (sentHistory === undefined || target > sentHistory) {
          // This replica's own commits since, from memory; a read for anything else.
          if (sentHistory !== undefined) sentHistory = await fromFeed(sentHistory, target);
          if (sentHistory === undefined || sentHistory < target) {
            const r = await ctx.db.query(VISIBLE_MESSAGES_SQL, [id, lastId]);
            sendMessages(r.rows.map(rowToMessage));
            sentHistory = target;
          }
        }
        const retrying = retryingOf(chat);
        const retryingJson = JSON.stringify(retrying);
        if (chat.status !== lastStatus || retryingJson !== lastRetrying) {
          lastStatus = chat.status;
          lastRetrying = retryingJson;
          send("status", { status: chat.status, retrying });
        }
        cursor.floor(chat.historyVersion, chat.generationAttempt);
        relay?.follow(chat.workerId);
      } while (again && !out.closed);
    } catch (err) {
      request.log.error({ err }, "chat stream refresh failed");
      fail(STREAM_LOST);
    } finally {
      refreshing = false;
    }
  };

  if (ctx.replica && !out.closed) {
    const r = new OwnerRelay({
      db: ctx.db,
      chatId: id,
      selfId: ctx.replica.workerId,
      secret: ctx.replica.secret,
      onPart: sendPart,
      onChange,
      refresh: () => {
        if (started) void refresh();
      },
      onError: (err) => request.log.warn({ err, chatId: id }, "live parts relay"),
    });
    relay = r;
    out.onClose(() => r.close());
  }

  started = true;
  await refresh();
  if (out.closed) return;
  // Synchronous together: the episode so far, then every later part.
  for (const e of ctx.buffer.parts(id)) sendPart(e);
  out.onClose(ctx.buffer.subscribe(id, sendPart));
}
