// Users: the first user (the owner, only while nobody exists: the users table is locked while
// it is checked, so two racing calls make one owner), the caller, and users managed by admins
// and owners. Role rules: only an owner makes or unmakes an owner, and the last owner stays
// one (role changes lock the users table, so two racing demotions cannot both pass).
// No answer ever carries a password hash.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, Email, hashPassword, issueToken, Password, staff } from "./auth.ts";
import { ApiError, IdParams, notFound, parse } from "./errors.ts";
import { rowToUser, type User } from "./views.ts";

const Name = z.string().trim().max(200);

export const FirstUserBody = z.object({ email: Email, password: Password, name: Name.optional() });
const Role = z.enum(["owner", "admin", "member"]);
export const NewUserBody = FirstUserBody.extend({ role: Role });
export const UserPatch = z.object({ role: Role });

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
  app.post("/api/v1/users/first", async (request, reply) => {
    const body = parse(FirstUserBody, request.body, "body");
    const passwordHash = await hashPassword(body.password);
    const created = await ctx.db.transaction(async (tx) => {
      await tx.query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");
      const any = await tx.query("SELECT 1 FROM users LIMIT 1");
      if (any.rows.length > 0) return undefined;
      const user = (await insertUser(tx, { ...body, role: "owner", passwordHash }))!;
      const { token } = await issueToken(tx, user.id, "first user");
      await audit(tx, request, {
        userId: user.id,
        action: "user.create",
        target: user.id,
        details: { role: "owner", first: true },
      });
      return { user, token };
    });
    if (!created) {
      throw new ApiError(
        409,
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
    if (!user) throw new ApiError(409, "A user with this email already exists.", "email");
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
    const { role } = parse(UserPatch, request.body, "body");
    return ctx.db.transaction(async (tx) => {
      await tx.query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE");
      const r = await tx.query("SELECT * FROM users WHERE id = $1", [id]);
      if (!r.rows[0]) throw notFound("User", id);
      const before = rowToUser(r.rows[0]);
      if ((before.role === "owner" || role === "owner") && c.user.role !== "owner")
        throw new ApiError(403, "Only an owner can make or unmake an owner.", "role");
      if (before.role === "owner" && role !== "owner") {
        const owners = await tx.query("SELECT count(*)::int AS n FROM users WHERE role = 'owner'");
        if ((owners.rows[0]!.n as number) <= 1)
          throw new ApiError(
            409,
            "The last owner cannot be demoted.",
            "Make another user an owner first.",
          );
      }
      const u = await tx.query("UPDATE users SET role = $2 WHERE id = $1 RETURNING *", [id, role]);
      await audit(tx, request, {
        userId: c.user.id,
        action: "user.role",
        target: id,
        details: { from: before.role, to: role },
      });
      return rowToUser(u.rows[0]!);
    });
  });

  app.get("/api/v1/users", async (request) => {
    staff(request);
    const r = await ctx.db.query("SELECT * FROM users ORDER BY created_at, email");
    return { users: r.rows.map(rowToUser) };
  });
}
