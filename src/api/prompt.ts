// What goes into a chat's prompt, as the API shows and changes it (docs/prompt.md): the chat's
// context snapshot (refreshed by its owner), compaction on request, and the organisation-wide
// instructions an admin sets (audited). The prompt's text itself is chatd's (src/chatd/prompt).

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import {
  captureSnapshot,
  CONTEXT_CAPTURE_TIMEOUT_MS,
  contextView,
  loadSnapshot,
  organizationInstructions,
  ORGANIZATION_INSTRUCTIONS_MAX_BYTES,
  replaceSnapshot,
  setOrganizationInstructions,
  sinceBoundary,
} from "../chatd/prompt/index.ts";
import { loadModelHistory, requestCompaction } from "../chatd/transitions/index.ts";
import { UnsupportedAgentUrlError } from "../chatd/agents.ts";
import { audit } from "./audit.ts";
import { caller, staff } from "./auth.ts";
import { ownedChat } from "./chat-access.ts";
import type { ApiContext } from "./context.ts";
import { ApiError, IdParams, parse } from "./errors.ts";
import { agentFailure } from "./processes.ts";

/** The longest a refresh waits for the agent (its answer, and reaching it). */
const REFRESH_TIMEOUT_MS = 2 * CONTEXT_CAPTURE_TIMEOUT_MS;

export const InstructionsBody = z.object({
  text: z
    .string()
    .refine(
      (t) => Buffer.byteLength(t) <= ORGANIZATION_INSTRUCTIONS_MAX_BYTES,
      `must be at most ${ORGANIZATION_INSTRUCTIONS_MAX_BYTES} bytes`,
    ),
});

/** A chat's `context` field: its snapshot's files and when it was taken, or null before. */
export async function chatContext(ctx: ApiContext, chatId: string) {
  const kept = await loadSnapshot(ctx.db, chatId);
  return kept ? contextView(kept) : null;
}

export function promptRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/chats/:id/refresh-context", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const chat = await ownedChat(ctx, user, id);
    let client;
    try {
      client = chat.workspaceId ? await ctx.agents.forWorkspace(chat.workspaceId) : undefined;
    } catch (err) {
      if (err instanceof UnsupportedAgentUrlError)
        throw ApiError.coded(
          "agent_unreachable",
          "The workspace agent's URL is not http or https.",
        );
      throw err;
    }
    let snapshot;
    try {
      snapshot = await captureSnapshot(
        ctx.db,
        client,
        AbortSignal.timeout(REFRESH_TIMEOUT_MS),
        CONTEXT_CAPTURE_TIMEOUT_MS,
      );
    } catch (err) {
      throw agentFailure(err, undefined);
    }
    const kept = await replaceSnapshot(ctx.db, id, snapshot);
    const view = contextView(kept);
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.refresh_context",
      target: id,
      details: { files: view.files.length },
    });
    return { context: view };
  });

  app.post("/api/v1/chats/:id/compact", async (request, reply) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    await ownedChat(ctx, user, id);
    const since = sinceBoundary(await loadModelHistory(ctx.db, id)).filter((m) => !m.boundary);
    if (!since.some((m) => m.role === "assistant")) {
      throw ApiError.coded(
        "conflict",
        "Nothing to compact: the model has not answered since the last compaction.",
      );
    }
    const status = await requestCompaction(ctx.db, id);
    await audit(ctx.db, request, {
      userId: user.id,
      action: "chat.compact",
      target: id,
      details: { status },
    });
    return reply.code(202).send({ status });
  });

  app.get("/api/v1/settings/instructions", async (request) => {
    caller(request);
    return { text: (await organizationInstructions(ctx.db)) ?? "" };
  });

  app.put("/api/v1/settings/instructions", async (request) => {
    const { user } = staff(request);
    const { text } = parse(InstructionsBody, request.body, "body");
    await setOrganizationInstructions(ctx.db, text, user.id);
    // The size, never the text (it may say anything).
    await audit(ctx.db, request, {
      userId: user.id,
      action: "settings.instructions",
      details: { bytes: Buffer.byteLength(text) },
    });
    return { text };
  });
}
