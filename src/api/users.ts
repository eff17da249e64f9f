// Users: the first user (an admin, only while nobody exists: the users table is locked while
// it is checked, so two racing calls make one admin), the caller, and admin-managed users.
// No answer ever carries a password hash.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import type { ApiContext } from "./app.ts";
import { admin, caller, Email, hashPassword, issueToken, Password } from "./auth.ts";
import { ApiError, parse } from "./errors.ts";
import { rowToUser, type User } from "./views.ts";

const Name = z.string().trim().max(200);

const FirstUserBody = z.object({ email: Email, password: Password, name: Name.optional() });
const NewUserBody = FirstUserBody.extend({ role: z.enum(["admin", "member"]) });

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
      const user = (await insertUser(tx, { ...body, role: "admin", passwordHash }))!;
      const { token } = await issueToken(tx, user.id, "first user");
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
    admin(request);
    const body = parse(NewUserBody, request.body, "body");
    const user = await insertUser(ctx.db, {
      ...body,
      passwordHash: await hashPassword(body.password),
    });
    if (!user) throw new ApiError(409, "A user with this email already exists.", "email");
    return reply.code(201).send(user);
  });

  app.get("/api/v1/users", async (request) => {
    admin(request);
    const r = await ctx.db.query("SELECT * FROM users ORDER BY created_at, email");
    return { users: r.rows.map(rowToUser) };
  });
}
