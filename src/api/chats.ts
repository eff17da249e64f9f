// Chats and their messages. Only its owner acts on a chat (sends, edits, interrupts); admins
// and owners may also read everyone's (the chat, its messages, stream and usage). For anyone
// else another user's chat is "not found", never "forbidden", so IDs reveal nothing. Every
// change goes through chatd's transitions (create, sendMessage, interrupt) and records who
// acted: messages carry created_by, and creation, interrupts and edits go to the audit log.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ChatRefusedError, rowToChat, type Chat } from "../chatd/chats.ts";
import { rowToMessage } from "../chatd/messages.ts";
import {
  createChatWithHistory,
  editMessage,
  interrupt,
  loadQueue,
  removeQueued,
  sendMessage,
  updateChat,
  ChatBusyError,
  type SendResult,
} from "../chatd/transitions/index.ts";
import type { ApiContext } from "./context.ts";
import { audit, auditPart } from "./audit.ts";
import { caller } from "./auth.ts";
import { ApiError, IdParams, Int64String, notFound, parse, Uuid } from "./errors.ts";
import {
  chatView,
  isVisibleMessage,
  messageView,
  queuedView,
  VISIBLE_MESSAGES_SQL,
  type User,
} from "./views.ts";
import { canUseWorkspace } from "./workspaces.ts";
import { ownedChat, readableChat } from "./chat-access.ts";
import { chatContext } from "./prompt.ts";
import { sseEvent } from "./sse-batch.ts";
import { followChat } from "./stream.ts";

const MessageText = z.string().refine((s) => s.trim() !== "", "must not be empty");

export const NewChatBody = z.object({
  workspace_id: Uuid.optional(),
  model_id: Uuid.optional(),
  title: z.string().trim().max(500).optional(),
  message: MessageText.optional(),
});

/**
 * `PATCH /chats/{id}`: what its owner changes about the chat itself. Each field is optional and
 * more may come (the MCP servers a chat uses); at least one is given.
 */
export const ChatPatchBody = z
  .strictObject({
    title: z.string().trim().min(1, "must not be empty").max(500).optional(),
    archived: z.boolean().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, "give at least one of title, archived");

/** `GET /chats?archived=true` lists the archived chats instead of the others. */
export const ChatListQuery = z.object({ archived: z.enum(["true", "false"]).optional() });

export const SendBody = z.object({
  text: MessageText,
  busy_behavior: z.enum(["queue", "interrupt"]).optional(),
});

export const EditBody = z.object({ text: MessageText });

export const MessageParams = z.object({ id: Uuid, message_id: Int64String });

export const QueuedParams = z.object({ id: Uuid, queued_id: Int64String });

export const AfterQuery = z.object({ after_id: Int64String.optional() });

/**
 * 403 when the chat runs on a workspace its owner may no longer use (an admin unshared it, or
 * gave it to someone else): a new turn would run commands there, and start it if stopped. A
 * workspace that is gone is left to the tools to report.
 */
async function refuseLostWorkspace(ctx: ApiContext, user: User, chat: Chat): Promise<void> {
  if (chat.workspaceId === null) return;
  const r = await ctx.db.query("SELECT * FROM workspaces WHERE id = $1", [chat.workspaceId]);
  const row = r.rows[0];
  if (row && !canUseWorkspace(user, row))
    throw new ApiError(
      403,
      "The chat's workspace is no longer shared with you.",
      "Start a new chat on a workspace of your own, or ask an admin to share it again.",
    );
}

/**
 * The workspace a new chat names, else the default one if the caller may use it (else none).
 * A named one is checked by createChat, in its statement.
 */
async function resolveWorkspace(
  ctx: ApiContext,
  user: User,
  id: string | undefined,
): Promise<string | null> {
  if (id !== undefined) return id;
  const chosen = (await ctx.defaultWorkspaceId?.()) ?? null;
  if (chosen !== null) return chosen;
  const r = await ctx.db.query(
    "SELECT * FROM workspaces WHERE is_default ORDER BY created_at DESC LIMIT 1",
  );
  // The default only for whoever may use it: the local workspace is its owner's.
  const row = r.rows[0];
  return row && canUseWorkspace(user, row) ? (row.id as string) : null;
}

/**
 * The model a new chat names (checked by createChat: a disabled one is as good as unknown),
 * else the default.
 */
async function resolveModel(ctx: ApiContext, id: string | undefined): Promise<string | null> {
  if (id !== undefined) return id;
  const chosen = (await ctx.defaultModelConfigId?.()) ?? null;
  if (chosen !== null) return chosen;
  const r = await ctx.db.query<{ id: string }>(
    "SELECT id FROM model_configs WHERE is_default ORDER BY created_at DESC LIMIT 1",
  );
  return r.rows[0]?.id ?? null;
}

/** Whether an Accept header asks for `text/event-stream`. */
function wantsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

function sentView(sent: SendResult): { message_id?: string; queued: boolean } {
  return sent.messageId === undefined
    ? { queued: sent.queued }
    : { message_id: sent.messageId, queued: sent.queued };
}

export function chatRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/chats", async (request, reply) => {
    const { user } = caller(request);
    const body = parse(NewChatBody, request.body ?? {}, "body");
    // The chat with its first message, the checks of what it names, its claim by this
    // replica's worker and the audit entry: one statement (createChat).
    const workspaceId = await resolveWorkspace(ctx, user, body.workspace_id);
    const modelConfigId = await resolveModel(ctx, body.model_id);
    // A chat with its first message starts its turn here: its agent is asked ahead (worker.ts).
    const claim = ctx.localClaim?.(
      body.message !== undefined
        ? { ownerId: user.id, workspaceId, modelConfigId, message: body.message }
        : undefined,
    );
    let created: Awaited<ReturnType<typeof createChatWithHistory>>;
    try {
      created = await createChatWithHistory(
        ctx.db,
        {
          ownerId: user.id,
          workspaceId,
          modelConfigId,
          ...(body.title !== undefined && { title: body.title }),
          ...(body.message !== undefined && { message: body.message }),
          parts: [
            auditPart(request, {
              userId: user.id,
              action: "chat.create",
              details: {
                workspace_id: workspaceId,
                model_id: modelConfigId,
                ...(body.message !== undefined && {
                  message_bytes: Buffer.byteLength(body.message),
                }),
              },
            }),
          ],
        },
        claim,
      );
    } catch (err) {
      if (!(err instanceof ChatRefusedError)) throw err;
      throw err.field === "workspace_id"
        ? notFound("Workspace", err.id, "workspace_id")
        : notFound("Model config", err.id, "model_id");
    }
    const { chat, history } = created;
    claim?.committed();
    const view = chatView(chat);
    // Asked for an event stream: the new chat's, from its start, after a `chat` event with
    // what the JSON answer holds (one request to create a chat and follow its turn).
    if (wantsEventStream(request.headers.accept))
      return followChat(ctx, request, reply, {
        chatId: chat.id,
        afterId: "0",
        opening: {
          status: 201,
          headers: { location: `/api/v1/chats/${chat.id}` },
          events: sseEvent("chat", view),
        },
        // Claimed here: the stream starts from the chat as created, with no read.
        ...(history && { created: { chat, messages: history.filter(isVisibleMessage) } }),
      });
    return reply.code(201).send(view);
  });

  app.get("/api/v1/chats", async (request) => {
    const { user } = caller(request);
    const query = parse(ChatListQuery, request.query, "query");
    const r = await ctx.db.query(
      "SELECT * FROM chats WHERE owner_id = $1 AND archived = $2 ORDER BY created_at DESC, id",
      [user.id, query.archived === "true"],
    );
    return { chats: r.rows.map((row) => chatView(rowToChat(row))) };
  });

  // Rename or archive ("delete": it leaves the list, and stays readable by its address).
  app.patch("/api/v1/chats/:id", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(ChatPatchBody, request.body, "body");
    await ownedChat(ctx, user, id);
    let chat: Chat;
    try {
      chat = await updateChat(ctx.db, id, body);
    } catch (err) {
      if (err instanceof ChatBusyError) throw new ApiError(409, err.message, "archived");
      throw err;
    }
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.update",
      target: id,
      details: body,
    });
    return chatView(chat);
  });

  app.get("/api/v1/chats/:id", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    const chat = await readableChat(ctx, request, id);
    return { ...chatView(chat), context: await chatContext(ctx, id) };
  });

  app.post("/api/v1/chats/:id/messages", async (request, reply) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(SendBody, request.body, "body");
    await refuseLostWorkspace(ctx, user, await ownedChat(ctx, user, id));
    const busy = body.busy_behavior ?? "queue";
    const sent = await sendMessage(
      ctx.db,
      id,
      user.id,
      body.text,
      busy,
      ctx.feed,
      ctx.localClaim?.(),
    );
    // Who sent how much, and how: never the text.
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.message",
      target: id,
      details: {
        bytes: Buffer.byteLength(body.text),
        busy_behavior: busy,
        queued: sent.queued,
        ...(sent.messageId !== undefined && { message_id: sent.messageId }),
      },
    });
    return reply.code(202).send(sentView(sent));
  });

  app.get("/api/v1/chats/:id/messages", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    const { after_id } = parse(AfterQuery, request.query, "query");
    await readableChat(ctx, request, id);
    const r = await ctx.db.query(VISIBLE_MESSAGES_SQL, [id, after_id ?? "0"]);
    return { messages: r.rows.map((row) => messageView(rowToMessage(row))) };
  });

  // An edit of a busy chat interrupts it and waits in the queue (`queued: true`) until the
  // running calls have their results; an idle chat starts again from the edit at once.
  app.patch("/api/v1/chats/:id/messages/:message_id", async (request) => {
    const { user } = caller(request);
    const { id, message_id } = parse(MessageParams, request.params, "path");
    const body = parse(EditBody, request.body, "body");
    await refuseLostWorkspace(ctx, user, await ownedChat(ctx, user, id));
    const sent = await editMessage(ctx.db, id, user.id, message_id, body.text, ctx.localClaim?.());
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.edit",
      target: id,
      details: { message_id, bytes: Buffer.byteLength(body.text), queued: sent.queued },
    });
    return sentView(sent);
  });

  app.post("/api/v1/chats/:id/interrupt", async (request, reply) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    await ownedChat(ctx, user, id);
    const status = await interrupt(ctx.db, id);
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.interrupt",
      target: id,
      details: { status },
    });
    return reply.code(202).send({ status });
  });

  // The messages waiting to run, in the order they will (an edit in waiting first).
  app.get("/api/v1/chats/:id/queue", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    await readableChat(ctx, request, id);
    return { messages: (await loadQueue(ctx.db, id)).map(queuedView) };
  });

  // Its owner takes a queued message back before it runs (not an edit in waiting: 404).
  app.delete("/api/v1/chats/:id/queue/:queued_id", async (request, reply) => {
    const { user } = caller(request);
    const { id, queued_id } = parse(QueuedParams, request.params, "path");
    await ownedChat(ctx, user, id);
    if (!(await removeQueued(ctx.db, id, queued_id))) throw notFound("Queued message", queued_id);
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.unqueue",
      target: id,
      details: { queued_id },
    });
    return reply.code(204).send();
  });
}
