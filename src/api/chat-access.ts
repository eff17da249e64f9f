// Who may act on a chat and who may read it: only its owner acts; admins and owners may also
// read everyone's, and such a read is audited. For anyone else another user's chat is "not
// found", never "forbidden", so IDs reveal nothing.

import type { FastifyRequest } from "fastify";
import type { Chat } from "../chatd/chats.ts";
import { loadChat } from "../chatd/transitions/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, isStaff } from "./auth.ts";
import { notFound } from "./errors.ts";
import type { User } from "./views.ts";

/** The chat if it exists and `user` owns it; 404 otherwise (also for another user's chat). */
export async function ownedChat(ctx: ApiContext, user: User, id: string): Promise<Chat> {
  const chat = await loadChat(ctx.db, id);
  if (!chat || chat.ownerId !== user.id) throw notFound("Chat", id);
  return chat;
}

/**
 * The chat if the caller may read it: its owner, an admin or an owner; 404 otherwise. An admin's
 * or owner's read of another user's chat (the chat, messages, stream, queue, usage, processes or
 * a process's output) is audited, once per request, as `chat.staff_read` with the route.
 */
export async function readableChat(
  ctx: ApiContext,
  request: FastifyRequest,
  id: string,
): Promise<Chat> {
  return checkReadable(ctx, request, id, await loadChat(ctx.db, id));
}

/** readableChat's check of `chat` as the caller read it (undefined: there is none). */
export async function checkReadable(
  ctx: ApiContext,
  request: FastifyRequest,
  id: string,
  chat: Chat | undefined,
): Promise<Chat> {
  const { user } = caller(request);
  if (!chat || (chat.ownerId !== user.id && !isStaff(user))) throw notFound("Chat", id);
  if (chat.ownerId !== user.id) {
    const params = request.params as Record<string, string | undefined>;
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.staff_read",
      target: id,
      details: {
        owner_id: chat.ownerId,
        route: `${request.method} ${request.routeOptions.url ?? ""}`,
        ...(params.process_id !== undefined && { process_id: params.process_id }),
      },
    });
  }
  return chat;
}
