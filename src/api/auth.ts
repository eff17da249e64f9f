// Authentication: scrypt password hashes, API tokens stored only as SHA-256, the bearer check
// every non-public route passes, and login. A token is looked up on every request, so a
// deleted token stops working at once; secrets are compared in constant time.

import {
  createHash,
  randomBytes,
  randomUUID,
  scrypt,
  timingSafeEqual,
  type ScryptOptions,
} from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import type { ApiContext } from "./app.ts";
import { ApiError, parse } from "./errors.ts";
import { rowToUser, type User } from "./views.ts";

/** scrypt cost parameters of new hashes (the stored hash carries its own). */
const SCRYPT_N = 16384;
const SCRYPT_R = 8;
const SCRYPT_P = 1;
const SCRYPT_KEY_BYTES = 32;
const SCRYPT_SALT_BYTES = 16;
const SCRYPT_MAX_MEMORY_BYTES = 64 * 1024 * 1024;
const TOKEN_BYTES = 32;
export const TOKEN_PREFIX = "tether_";

function scryptAsync(password: string, salt: Buffer, o: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, SCRYPT_KEY_BYTES, o, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64url, with a fresh random salt. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SCRYPT_SALT_BYTES);
  const o = { N: SCRYPT_N, r: SCRYPT_R, p: SCRYPT_P, maxmem: SCRYPT_MAX_MEMORY_BYTES };
  const key = await scryptAsync(password, salt, o);
  return [
    "scrypt",
    SCRYPT_N,
    SCRYPT_R,
    SCRYPT_P,
    salt.toString("base64url"),
    key.toString("base64url"),
  ].join("$");
}

/** True only when `password` matches `stored`; a malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !n || !r || !p || salt === undefined || hash === undefined)
    return false;
  const expected = Buffer.from(hash, "base64url");
  if (expected.length !== SCRYPT_KEY_BYTES) return false;
  const o = { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT_MAX_MEMORY_BYTES };
  let key: Buffer;
  try {
    key = await scryptAsync(password, Buffer.from(salt, "base64url"), o);
  } catch {
    return false;
  }
  return timingSafeEqual(key, expected);
}

/** A hash nobody's password matches, so a login for an unknown email costs the same time. */
let noUserHash: Promise<string> | undefined;

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Creates a token for `userId`; the secret is in the answer and nowhere else. */
export async function issueToken(
  q: Queryable,
  userId: string,
  name: string,
): Promise<{ id: string; token: string }> {
  const id = randomUUID();
  const token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString("base64url");
  await q.query("INSERT INTO api_tokens (id, user_id, name, token_hash) VALUES ($1, $2, $3, $4)", [
    id,
    userId,
    name,
    hashToken(token),
  ]);
  return { id, token };
}

/** The authenticated caller of a request, set by the bearer check. */
export interface Caller {
  user: User;
  tokenId: string;
}

const callers = new WeakMap<FastifyRequest, Caller>();

/** The caller of an authenticated route (the bearer check ran before the handler). */
export function caller(request: FastifyRequest): Caller {
  const c = callers.get(request);
  if (!c)
    throw new ApiError(401, "Missing or invalid API token.", "Send Authorization: Bearer <token>.");
  return c;
}

/** The caller, who must be an admin (403 otherwise). */
export function admin(request: FastifyRequest): Caller {
  const c = caller(request);
  if (c.user.role !== "admin") throw new ApiError(403, "Only an admin can do this.");
  return c;
}

/** Routes anyone may call without a token (`METHOD /url` as declared): the web UI's too. */
const PUBLIC_ROUTES = new Set([
  "GET /api/v1/health",
  "GET /metrics",
  "POST /api/v1/users/first",
  "GET /api/v1/setup",
  "POST /api/v1/auth/login",
  "GET /",
  "GET /*",
]);

/** Routes between replicas: they take the replica secret in this header, never a user token. */
const INTERNAL_ROUTE_PREFIX = "/internal/";
export const REPLICA_SECRET_HEADER = "x-tether-replica-secret";

/** Refreshes `last_used_at` at most this often per token, not on every request. */
const LAST_USED_RESOLUTION_S = 60;

/** Constant-time comparison of two secrets of any length. */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(hashToken(a)), Buffer.from(hashToken(b)));
}

/**
 * The bearer check of every route but the public ones (and of unknown `/api` paths); the
 * replica secret check of the internal routes.
 */
export async function authenticate(ctx: ApiContext, request: FastifyRequest): Promise<void> {
  const route = request.routeOptions.url;
  const method = request.method === "HEAD" ? "GET" : request.method;
  if (route?.startsWith(INTERNAL_ROUTE_PREFIX)) {
    const given = request.headers[REPLICA_SECRET_HEADER];
    const secret = ctx.replica?.secret;
    if (secret === undefined || typeof given !== "string" || !sameSecret(given, secret)) {
      throw new ApiError(
        401,
        "Internal routes are for replicas only.",
        `Replicas send the shared secret in ${REPLICA_SECRET_HEADER}.`,
      );
    }
    return;
  }
  if (
    route === undefined ? !request.url.startsWith("/api") : PUBLIC_ROUTES.has(`${method} ${route}`)
  ) {
    return;
  }
  const header = request.headers.authorization ?? "";
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new ApiError(401, "Missing API token.", "Send Authorization: Bearer <token>.");
  const r = await ctx.db.query<{ token_id: string } & Record<string, unknown>>(
    `SELECT u.*, t.id AS token_id FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1`,
    [hashToken(m[1]!)],
  );
  const row = r.rows[0];
  if (!row) throw new ApiError(401, "Invalid API token.", "Log in again or create a new token.");
  await ctx.db.query(
    `UPDATE api_tokens SET last_used_at = now() WHERE id = $1
     AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => $2))`,
    [row.token_id, LAST_USED_RESOLUTION_S],
  );
  callers.set(request, { user: rowToUser(row), tokenId: row.token_id });
}

export const Email = z
  .string()
  .trim()
  .max(254)
  .regex(/^[^\s@]+@[^\s@]+$/, "must be an email address")
  .transform((s) => s.toLowerCase());
export const Password = z.string().min(8, "must be at least 8 characters").max(1024);

const LoginBody = z.object({ email: Email, password: z.string().max(1024) });

export function authRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/auth/login", async (request) => {
    const body = parse(LoginBody, request.body, "body");
    const r = await ctx.db.query("SELECT * FROM users WHERE email = $1", [body.email]);
    const row = r.rows[0];
    const ok = row
      ? await verifyPassword(body.password, row.password_hash as string)
      : await verifyPassword(body.password, await (noUserHash ??= hashPassword(randomUUID()))).then(
          () => false,
        );
    if (!row || !ok) throw new ApiError(401, "Wrong email or password.");
    const { token } = await issueToken(ctx.db, row.id as string, "login");
    return { token };
  });
}
