// Workspaces: a name and the URL (and optional token) of a workspace agent. A member sees and
// uses the workspaces they registered and the shared ones (no owner, like the server's local
// workspace); an admin sees all. The agent token is stored but never answered.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import type { ApiContext } from "./app.ts";
import { caller } from "./auth.ts";
import { parse } from "./errors.ts";
import { workspaceView, type User } from "./views.ts";

const HttpUrl = z
  .string()
  .trim()
  .max(2048)
  .refine(
    (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol),
    "must be an http(s) URL",
  );

const NewWorkspaceBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(200),
  agent_url: HttpUrl,
  agent_token: z.string().min(1, "must not be empty").max(4096).optional(),
});

/** `true` when `user` may see and use the workspace row. */
export function canUseWorkspace(user: User, row: Record<string, unknown>): boolean {
  return user.role === "admin" || row.owner_id === null || row.owner_id === user.id;
}

/** The workspace if it exists and `user` may use it. */
export async function findWorkspace(
  q: Queryable,
  user: User,
  id: string,
): Promise<Record<string, unknown> | undefined> {
  const r = await q.query("SELECT * FROM workspaces WHERE id = $1", [id]);
  const row = r.rows[0];
  return row && canUseWorkspace(user, row) ? row : undefined;
}

export function workspaceRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/workspaces", async (request, reply) => {
    const { user } = caller(request);
    const body = parse(NewWorkspaceBody, request.body, "body");
    const r = await ctx.db.query(
      `INSERT INTO workspaces (id, owner_id, name, agent_url, agent_token) VALUES ($1, $2, $3, $4, $5)
       RETURNING *`,
      [randomUUID(), user.id, body.name, body.agent_url, body.agent_token ?? null],
    );
    return reply.code(201).send(workspaceView(r.rows[0]!));
  });

  app.get("/api/v1/workspaces", async (request) => {
    const { user } = caller(request);
    const r = await ctx.db.query(
      `SELECT * FROM workspaces WHERE $1 OR owner_id IS NULL OR owner_id = $2
       ORDER BY is_default DESC, created_at, id`,
      [user.role === "admin", user.id],
    );
    return { workspaces: r.rows.map(workspaceView) };
  });
}
