// The caller's API tokens: create (the secret is answered once and stored only as a hash),
// list (never a secret; `kind` is `session` for a login's, `current` the one asking) and delete
// (the token fails its very next request, bearer or session cookie alike). A token of another
// user is not found, whoever asks.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, issueToken } from "./auth.ts";
import { IdParams, notFound, parse } from "./errors.ts";
import { tokenView } from "./views.ts";

export const NewTokenBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(200),
});

export function tokenRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/tokens", async (request, reply) => {
    const { user } = caller(request);
    const body = parse(NewTokenBody, request.body, "body");
    const issued = await issueToken(ctx.db, user.id, body.name);
    await audit(ctx.db, request, {
      userId: user.id,
      action: "token.create",
      target: issued.id,
      details: { name: body.name },
    });
    return reply.code(201).send(issued);
  });

  app.get("/api/v1/tokens", async (request) => {
    const { user, tokenId } = caller(request);
    const r = await ctx.db.query(
      "SELECT id, name, kind, created_at, last_used_at FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id",
      [user.id],
    );
    return { tokens: r.rows.map((row) => tokenView(row, tokenId)) };
  });

  app.delete("/api/v1/tokens/:id", async (request, reply) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const r = await ctx.db.query("DELETE FROM api_tokens WHERE id = $1 AND user_id = $2", [
      id,
      user.id,
    ]);
    if (r.affectedRows === 0) throw notFound("Token", id);
    await audit(ctx.db, request, { userId: user.id, action: "token.revoke", target: id });
    return reply.code(204).send();
  });
}
