// STAND-IN until the dialout branch merges (delete this file and its line in app.ts and
// auth.ts then): where a stand-in `tether agent --server URL` (src/cli/agent-standin.ts)
// announces itself. It listens on loopback and registers its URL here with its agent token;
// the workspace then reaches it like a registered one, and the connection row says it is
// connected. The real agent dials out instead (GET /api/v1/agents/connect, reverse HTTP/2).

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { workspaceForAgentToken } from "../workspaces/agent-tokens.ts";
import type { ApiContext } from "./context.ts";
import { ApiError, parse } from "./errors.ts";

export const STANDIN_REGISTER_ROUTE = "/standin/v1/agents/register";

const RegisterBody = z.object({
  url: z
    .string()
    .refine(
      (s) => URL.canParse(s) && /^http:\/\/127\.0\.0\.1:\d+$/.test(s.replace(/\/$/, "")),
      "must be http://127.0.0.1:PORT",
    ),
});

export function agentStandInRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post(STANDIN_REGISTER_ROUTE, async (request, reply) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "");
    const token = m?.[1];
    const workspaceId = token && (await workspaceForAgentToken(ctx.db, token));
    if (!token || !workspaceId) throw new ApiError(401, "Unknown or revoked agent token.");
    if (!ctx.replica) throw new ApiError(409, "This server takes no agents.");
    const { url } = parse(RegisterBody, request.body, "body");
    await ctx.db.transaction(async (tx) => {
      const w = await tx.query<{ agent_url: string | null }>(
        "SELECT agent_url FROM workspaces WHERE id = $1 FOR UPDATE",
        [workspaceId],
      );
      const fresh = w.rows[0]?.agent_url !== url;
      await tx.query("UPDATE workspaces SET agent_url = $2, agent_token = $3 WHERE id = $1", [
        workspaceId,
        url,
        token,
      ]);
      await tx.query(
        `INSERT INTO agent_connections (workspace_id, worker_id, connected_at) VALUES ($1, $2, now())
         ON CONFLICT (workspace_id) DO UPDATE SET worker_id = EXCLUDED.worker_id,
           connected_at = CASE WHEN $3 THEN now() ELSE agent_connections.connected_at END`,
        [workspaceId, ctx.replica!.workerId, fresh],
      );
    });
    return reply.code(204).send();
  });
}
