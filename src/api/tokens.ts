// API tokens: the caller's own — create (the secret is answered once and stored only as a
// hash; optionally expiring), list (never a secret; `kind` is `session` for a login's,
// `current` the one asking) and delete (the token fails its very next request, bearer or
// session cookie alike) — and, for admins and owners, any user's: listed and revoked the same
// way (an owner's only by an owner). A token of another user is not found through the caller's
// own routes, whoever asks.

import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { realClock } from "../contract/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, staff } from "./auth.ts";
import { issueToken } from "./credentials.ts";
import { ApiError, IdParams, notFound, parse, Uuid } from "./errors.ts";
import { tokenView } from "./views.ts";

/** The longest lifetime a token may be given: ten years. */
export const MAX_TOKEN_LIFETIME_MS = 10 * 365 * 24 * 60 * 60_000;

export const NewTokenBody = z
  .object({
    name: z.string().trim().min(1, "must not be empty").max(200),
    /** The token stops working this long after it is made. */
    expires_in_ms: z.number().int().positive().max(MAX_TOKEN_LIFETIME_MS).optional(),
    /** The token stops working at this time (ISO 8601, in the future). */
    expires_at: z.iso.datetime({ offset: true }).optional(),
  })
  .refine((b) => b.expires_in_ms === undefined || b.expires_at === undefined, {
    message: "send expires_in_ms or expires_at, not both",
    path: ["expires_at"],
  });

export const UserTokenParams = z.object({ id: Uuid, token_id: Uuid });

const TOKEN_COLUMNS = "id, name, kind, created_at, last_used_at, expires_at";

export function tokenRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const clock = ctx.clock ?? realClock;

  app.post("/api/v1/tokens", async (request, reply) => {
    const { user } = caller(request);
    const body = parse(NewTokenBody, request.body, "body");
    const now = clock.now();
    const expiresAtMs =
      body.expires_in_ms !== undefined
        ? now + body.expires_in_ms
        : body.expires_at !== undefined
          ? Date.parse(body.expires_at)
          : undefined;
    if (
      expiresAtMs !== undefined &&
      (expiresAtMs <= now || expiresAtMs > now + MAX_TOKEN_LIFETIME_MS)
    ) {
      throw ApiError.coded(
        "invalid_body",
        "Invalid request body.",
        "expires_at: must be in the future, at most ten years away",
      );
    }
    const issued = await issueToken(ctx.db, user.id, body.name, "api", {
      nowMs: now,
      ...(expiresAtMs !== undefined && { expiresAtMs }),
    });
    const expires_at = expiresAtMs === undefined ? null : new Date(expiresAtMs).toISOString();
    await audit(ctx.db, request, {
      userId: user.id,
      action: "token.create",
      target: issued.id,
      details: { name: body.name, expires_at },
    });
    return reply.code(201).send({ ...issued, expires_at });
  });

  app.get("/api/v1/tokens", async (request) => {
    const { user, tokenId } = caller(request);
    const r = await ctx.db.query(
      `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id`,
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
    ctx.tokens.changed(); // at once here; the trigger's notification tells the other replicas
    await audit(ctx.db, request, { userId: user.id, action: "token.revoke", target: id });
    return reply.code(204).send();
  });

  /** The user whose tokens an admin manages: 404 when unknown, 403 for an owner's by an admin. */
  const managedUser = async (request: FastifyRequest, id: string) => {
    const c = staff(request);
    const r = await ctx.db.query<{ role: string }>("SELECT role FROM users WHERE id = $1", [id]);
    const target = r.rows[0];
    if (!target) throw notFound("User", id);
    if (target.role === "owner" && c.user.role !== "owner")
      throw new ApiError(403, "Only an owner manages an owner's tokens.");
    return c;
  };

  // Any user's tokens and sessions, for admins (offboarding, a lost laptop): never a secret.
  app.get("/api/v1/users/:id/tokens", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    const { tokenId } = await managedUser(request, id);
    const r = await ctx.db.query(
      `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id`,
      [id],
    );
    return { tokens: r.rows.map((row) => tokenView(row, tokenId)) };
  });

  app.delete("/api/v1/users/:id/tokens/:token_id", async (request, reply) => {
    const { id, token_id } = parse(UserTokenParams, request.params, "path");
    const { user } = await managedUser(request, id);
    const r = await ctx.db.query("DELETE FROM api_tokens WHERE id = $1 AND user_id = $2", [
      token_id,
      id,
    ]);
    if (r.affectedRows === 0) throw notFound("Token", token_id);
    ctx.tokens.changed();
    await audit(ctx.db, request, {
      userId: user.id,
      action: "token.revoke",
      target: token_id,
      details: { user_id: id },
    });
    return reply.code(204).send();
  });
}
