// Users: the first user (the owner, only while nobody exists: the users table is locked while
// it is checked, so two racing calls make one owner), the caller and their password, and users
// managed by admins and owners. Role rules: only an owner makes, unmakes, disables or enables an
// owner, nobody disables themself, and the last enabled owner stays an enabled owner (changes
// lock the users table, so two racing demotions cannot both pass). Disabling a user deletes
// every token and session of theirs in the same transaction and refuses their sign-ins.
// No answer ever carries a password hash.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import { realClock } from "../contract/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, Email, Password, staff } from "./auth.ts";
import { hashPassword, issueToken, verifyPassword } from "./credentials.ts";
import { ApiError, IdParams, notFound, parse } from "./errors.ts";
import { DEFAULT_THROTTLE, LoginThrottle } from "./throttle.ts";
import { rowToUser, type User } from "./views.ts";

const Name = z.string().trim().max(200);

export const FirstUserBody = z.object({ email: Email, password: Password, name: Name.optional() });
const Role = z.enum(["owner", "admin", "member"]);
export const NewUserBody = FirstUserBody.extend({ role: Role });
/** A role, `disabled`, or both; an owner is changed only by an owner. */
export const UserPatch = z
  .object({ role: Role.optional(), disabled: z.boolean().optional() })
  .refine((b) => b.role !== undefined || b.disabled !== undefined, "send role or disabled");

export const PasswordChange = z.object({
  current_password: z.string().max(1024),
  new_password: Password,
});

/** Inserts a user; undefined when the email is taken. */
async function insertUser(
  q: Queryable,
  u: { email: string; name?: string; role: User["role"]; passwordHash: string },
): Promise<User | undefined> {
  const r = await q.query(
    `INSERT INTO users (id, email, name, role, password_hash) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (email) DO NOTHING RETURNING *`,
    [randomUUID(), u.email, u.name ?? "", u.role, u.passwordHash],
  );
  return r.rows[0] ? rowToUser(r.rows[0]) : undefined;
}

export function userRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const throttle = new LoginThrottle(ctx.db, { ...DEFAULT_THROTTLE, ...ctx.loginThrottle });
  app.post("/api/v1/users/first", async (request, reply) => {
    const body = parse(FirstUserBody, request.body, "body");
    const passwordHash = await hashPassword(body.password);
    const created = await ctx.db.transaction(async (tx) => {
      await tx.query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");
      const any = await tx.query("SELECT 1 FROM users LIMIT 1");
      if (any.rows.length > 0) return undefined;
      const user = (await insertUser(tx, { ...body, role: "owner", passwordHash }))!;
      const { token } = await issueToken(tx, user.id, "first user", "api", {
        nowMs: (ctx.clock ?? realClock).now(),
      });
      await audit(tx, request, {
        userId: user.id,
        action: "user.create",
        target: user.id,
        details: { role: "owner", first: true },
      });
      return { user, token };
    });
    if (!created) {
      throw ApiError.coded(
        "first_user_exists",
        "The first user already exists.",
        "Log in, or ask an admin to create your user.",
      );
    }
    return reply.code(201).send(created);
  });

  // Public: whether the UI shows setup (the first user) or sign-in. Reveals nothing else.
  app.get("/api/v1/setup", async () => {
    const any = await ctx.db.query("SELECT 1 FROM users LIMIT 1");
    return { first_user_needed: any.rows.length === 0 };
  });

  app.get("/api/v1/me", async (request) => caller(request).user);

  app.post("/api/v1/users", async (request, reply) => {
    const c = staff(request);
    const body = parse(NewUserBody, request.body, "body");
    if (body.role === "owner" && c.user.role !== "owner")
      throw new ApiError(403, "Only an owner can make an owner.", "role");
    const user = await insertUser(ctx.db, {
      ...body,
      passwordHash: await hashPassword(body.password),
    });
    if (!user)
      throw ApiError.coded("email_taken", "A user with this email already exists.", "email");
    await audit(ctx.db, request, {
      userId: c.user.id,
      action: "user.create",
      target: user.id,
      details: { email: user.email, role: user.role },
    });
    return reply.code(201).send(user);
  });

  app.patch("/api/v1/users/:id", async (request) => {
    const c = staff(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(UserPatch, request.body, "body");
    const patched = await ctx.db.transaction(async (tx) => {
      await tx.query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");
      const r = await tx.query("SELECT * FROM users WHERE id = $1", [id]);
      if (!r.rows[0]) throw notFound("User", id);
      const before = rowToUser(r.rows[0]);
      const role = body.role ?? before.role;
      const disabled = body.disabled ?? before.disabled;
      if ((before.role === "owner" || role === "owner") && c.user.role !== "owner") {
        throw new ApiError(
          403,
          "Only an owner can make, unmake, disable or enable an owner.",
          body.role === undefined ? "disabled" : "role",
        );
      }
      if (disabled && !before.disabled && id === c.user.id)
        throw ApiError.coded("cannot_disable_self", "You cannot disable yourself.", "disabled");
      // The last enabled owner stays one, enabled: someone must be able to manage owners.
      if (before.role === "owner" && !before.disabled && (role !== "owner" || disabled)) {
        const others = await tx.query(
          "SELECT count(*)::int AS n FROM users WHERE role = 'owner' AND disabled_at IS NULL AND id <> $1",
          [id],
        );
        if ((others.rows[0]!.n as number) === 0) {
          throw ApiError.coded(
            "last_owner",
            role !== "owner"
              ? "The last owner cannot be demoted."
              : "The last owner cannot be disabled.",
            "Make another user an owner first.",
          );
        }
      }
      const u = await tx.query(
        `UPDATE users SET role = $2,
           disabled_at = CASE WHEN NOT $3 THEN NULL ELSE coalesce(disabled_at, to_timestamp($4::float8 / 1000)) END
         WHERE id = $1 RETURNING *`,
        [id, role, disabled, (ctx.clock ?? realClock).now()],
      );
      if (role !== before.role) {
        await audit(tx, request, {
          userId: c.user.id,
          action: "user.role",
          target: id,
          details: { from: before.role, to: role },
        });
      }
      if (disabled !== before.disabled) {
        // Every token and session of a disabled user ends now; enabling brings none back.
        const ended = disabled
          ? (await tx.query("DELETE FROM api_tokens WHERE user_id = $1", [id])).affectedRows
          : 0;
        await audit(tx, request, {
          userId: c.user.id,
          action: disabled ? "user.disable" : "user.enable",
          target: id,
          details: disabled ? { tokens_ended: ended } : {},
        });
      }
      return rowToUser(u.rows[0]!);
    });
    ctx.tokens.changed(); // at once here; the trigger's notification tells the other replicas
    return patched;
  });

  // The caller's own password: the current one proves it is them (a stolen session alone does
  // not change it), guesses are throttled like sign-ins, and every other session of theirs ends
  // (this one stays; API tokens stay, revoked one by one in the token list).
  app.post("/api/v1/me/password", async (request, reply) => {
    const { user, tokenId } = caller(request);
    const body = parse(PasswordChange, request.body, "body");
    const keys = [`password:${user.id}`];
    const wait = await throttle.attempt(keys);
    if (wait > 0) {
      const s = String(Math.ceil(wait / 1000));
      throw ApiError.coded(
        "rate_limited",
        "Too many wrong passwords; try again later.",
        `Retry after ${s} s.`,
        {
          "retry-after": s,
        },
      );
    }
    const r = await ctx.db.query("SELECT password_hash FROM users WHERE id = $1", [user.id]);
    if (!(await verifyPassword(body.current_password, r.rows[0]!.password_hash as string))) {
      await audit(ctx.db, request, {
        userId: user.id,
        action: "user.password_failed",
        target: user.id,
      });
      throw ApiError.coded("wrong_password", "The current password is wrong.", "current_password");
    }
    await throttle.succeed(keys);
    const hash = await hashPassword(body.new_password);
    await ctx.db.transaction(async (tx) => {
      await tx.query("UPDATE users SET password_hash = $2 WHERE id = $1", [user.id, hash]);
      const ended = await tx.query(
        "DELETE FROM api_tokens WHERE user_id = $1 AND kind = 'session' AND id <> $2",
        [user.id, tokenId],
      );
      await audit(tx, request, {
        userId: user.id,
        action: "user.password",
        target: user.id,
        details: { sessions_ended: ended.affectedRows },
      });
    });
    ctx.tokens.changed();
    return reply.code(204).send();
  });

  app.get("/api/v1/users", async (request) => {
    staff(request);
    const r = await ctx.db.query("SELECT * FROM users ORDER BY created_at, email");
    return { users: r.rows.map(rowToUser) };
  });
}
