// Authentication: the bearer check every non-public route passes, login and logout (the
// credentials themselves, password and token hashes, are credentials.ts). A token's lookup is
// held by each replica for a few seconds at most (token-cache.ts) and dropped on every replica
// as soon as a trigger tells it the token or its user changed, so a deleted token stops working
// then; expiry and idle time are checked on every request; secrets are compared in constant
// time. Failed logins are counted in the database, so the throttle holds across every replica,
// not per process.
//
// Browser sessions: login also sets the token it answers as an HttpOnly, SameSite=Strict
// cookie, which the bearer check accepts in place of the header. The CSRF rule: a request
// authenticated by that cookie (not by an Authorization header) that changes state (anything
// but GET/HEAD/OPTIONS) must carry `x-tether-csrf: 1` — a header a cross-site form cannot set
// and a cross-site script cannot send without a CORS preflight we never answer — and, when it
// has an Origin, one equal to the request's own host; otherwise 403.

import { randomUUID, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { realClock } from "../contract/index.ts";
import type { ApiContext } from "./context.ts";
import { audit, clientAddress } from "./audit.ts";
import { hashPassword, hashToken, issueToken, verifyPassword } from "./credentials.ts";
import { ApiError, parse } from "./errors.ts";
import { DEFAULT_THROTTLE, LoginThrottle } from "./throttle.ts";
import { rowToUser, type User } from "./views.ts";
import { REPLICA_SECRET_HEADER } from "../chatd/replicas.ts";

/** A hash nobody's password matches, so a login for an unknown email costs the same time. */
let noUserHash: Promise<string> | undefined;

/** How long a browser session may go unused before it ends, unless ApiOptions says otherwise. */
export const DEFAULT_SESSION_IDLE_MS = 7 * 24 * 60 * 60_000;

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

/** Whether the user is an admin or the owner: they manage users, models and the audit log. */
export function isStaff(user: User): boolean {
  return user.role === "owner" || user.role === "admin";
}

/** The caller, who must be an admin or an owner (403 otherwise). */
export function staff(request: FastifyRequest): Caller {
  const c = caller(request);
  if (!isStaff(c.user)) throw new ApiError(403, "Only an admin or the owner can do this.");
  return c;
}

/**
 * Routes anyone may call without a token (`METHOD /url` as declared): the web UI's too. The
 * OpenAPI document marks these as needing no security.
 */
export const PUBLIC_ROUTES = new Set([
  "GET /api/v1/health",
  "GET /api/v1/openapi.json",
  "GET /metrics",
  "POST /api/v1/users/first",
  "GET /api/v1/setup",
  "POST /api/v1/auth/login",
  "GET /",
  "GET /*",
  // STAND-IN until the dialout branch merges: the stand-in agent shows its agent token.
]);

/** Routes between replicas: they take the replica secret in this header, never a user token. */
const INTERNAL_ROUTE_PREFIX = "/internal/";
export { REPLICA_SECRET_HEADER };

/**
 * Refreshes `last_used_at` at most this often per token (or a quarter of the session idle time,
 * if less), not on every request.
 */
const LAST_USED_RESOLUTION_MS = 60_000;

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
  const header = request.headers.authorization;
  const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  const cookie = header === undefined ? sessionCookie(request) : undefined;
  const secret = m?.[1] ?? cookie;
  if (secret === undefined)
    throw new ApiError(401, "Missing API token.", "Send Authorization: Bearer <token>.");
  if (cookie !== undefined) checkCsrf(request);
  const hash = hashToken(secret);
  const lookup = async (): Promise<TokenRow | undefined> =>
    (
      await ctx.db.query<TokenRow>(
        `SELECT u.*, t.id AS token_id, t.kind AS token_kind, t.expires_at AS token_expires_at,
           t.last_used_at AS token_last_used_at, t.created_at AS token_created_at
         FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1`,
        [hash],
      )
    ).rows[0];
  const now = (ctx.clock ?? realClock).now();
  const idleMs = ctx.sessionIdleMs ?? DEFAULT_SESSION_IDLE_MS;
  const found = await ctx.tokens.read(hash, lookup);
  let row = found.value;
  let refusal = row && tokenRefusal(row, now, idleMs);
  if (refusal && found.held) {
    // A held row only lets in: a refusal is decided on the row as it is now (another replica
    // may have used the session since this one read it).
    ctx.tokens.forget(hash);
    row = await lookup();
    refusal = row && tokenRefusal(row, now, idleMs);
  }
  if (!row) throw new ApiError(401, "Invalid API token.", "Log in again or create a new token.");
  if (refusal) {
    ctx.tokens.forget(hash);
    // An idle session is over for good: it leaves the caller's token list too.
    if (refusal.code === "session_expired")
      await ctx.db.query("DELETE FROM api_tokens WHERE id = $1", [row.token_id]);
    throw refusal;
  }
  const lastUsed = row.token_last_used_at?.getTime();
  // Often enough that a session in use never looks idle, however short the idle time.
  const resolutionMs = Math.min(LAST_USED_RESOLUTION_MS, idleMs / 4);
  if (lastUsed === undefined || lastUsed < now - resolutionMs) {
    await ctx.db.query(
      "UPDATE api_tokens SET last_used_at = to_timestamp($2::float8 / 1000) WHERE id = $1",
      [row.token_id, now],
    );
    // The held row too (the trigger ignores this column), so the next request does not repeat it.
    row.token_last_used_at = new Date(now);
  }
  callers.set(request, { user: rowToUser(row), tokenId: row.token_id });
}

/** A token with its user, as the bearer check reads it (and TokenCache holds it). */
export type TokenRow = Record<string, unknown> & {
  token_id: string;
  token_kind: "api" | "session";
  token_expires_at: Date | null;
  /** When it was last used, to LAST_USED_RESOLUTION_MS; null until its first use. */
  token_last_used_at: Date | null;
  token_created_at: Date;
  disabled_at: Date | null;
};

/**
 * Why the token is refused, if it is, in order: its user is disabled (their tokens were deleted then, but
 * one issued by a racing login is refused here); it expired; it is a session idle too long.
 */
function tokenRefusal(row: TokenRow, now: number, sessionIdleMs: number): ApiError | undefined {
  if (row.disabled_at !== null)
    return ApiError.coded("user_disabled", "This user is disabled.", "Ask an admin to enable it.");
  if (row.token_expires_at !== null && row.token_expires_at.getTime() <= now) {
    return ApiError.coded(
      "token_expired",
      "This API token has expired.",
      "Create a new token (POST /api/v1/tokens).",
    );
  }
  const active = (row.token_last_used_at ?? row.token_created_at).getTime();
  if (row.token_kind === "session" && active <= now - sessionIdleMs) {
    return ApiError.coded(
      "session_expired",
      "This session has ended: it was not used for too long.",
      "Log in again.",
    );
  }
  return undefined;
}

/** The browser session cookie: the login token, never readable by scripts. */
export const SESSION_COOKIE = "tether_session";
export const CSRF_HEADER = "x-tether-csrf";

function sessionCookie(request: FastifyRequest): string | undefined {
  for (const pair of (request.headers.cookie ?? "").split(";")) {
    const eq = pair.indexOf("=");
    if (eq > 0 && pair.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = pair.slice(eq + 1).trim();
      return value === "" ? undefined : value;
    }
  }
  return undefined;
}

/** The CSRF rule of cookie-authenticated requests (see the top of this file). */
function checkCsrf(request: FastifyRequest): void {
  if (["GET", "HEAD", "OPTIONS"].includes(request.method)) return;
  const origin = request.headers.origin;
  // Hosts compared as URLs normalise them ("host:80" is "host"); the scheme is not compared, as
  // a TLS-terminating proxy makes an https page's request arrive over http.
  const own = `${request.protocol}://${request.host}`;
  const sameOrigin =
    origin === undefined ||
    (URL.canParse(origin) && URL.canParse(own) && new URL(origin).host === new URL(own).host);
  if (request.headers[CSRF_HEADER] !== "1" || !sameOrigin) {
    throw ApiError.coded(
      "csrf_rejected",
      "A request authenticated by the session cookie must come from this site.",
      `Send ${CSRF_HEADER}: 1 from the same origin, or use Authorization: Bearer <token>.`,
    );
  }
}

/** Sets the session cookie to `token`, or clears it when `token` is null. */
function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string | null,
): void {
  const secure = request.protocol === "https" ? "; Secure" : "";
  const value = token === null ? "=; Max-Age=0" : `=${token}`;
  void reply.header(
    "set-cookie",
    `${SESSION_COOKIE}${value}; Path=/; HttpOnly; SameSite=Strict${secure}`,
  );
}

export const Email = z
  .string()
  .trim()
  .max(254)
  .regex(/^[^\s@]+@[^\s@]+$/, "must be an email address")
  .transform((s) => s.toLowerCase());
export const Password = z.string().min(8, "must be at least 8 characters").max(1024);

export const LoginBody = z.object({ email: Email, password: z.string().max(1024) });

export function authRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const throttle = new LoginThrottle(ctx.db, { ...DEFAULT_THROTTLE, ...ctx.loginThrottle });
  app.post("/api/v1/auth/login", async (request, reply) => {
    const body = parse(LoginBody, request.body, "body");
    const keys = [`email:${body.email}`, `ip:${clientAddress(request)}`];
    const wait = await throttle.attempt(keys);
    if (wait > 0) {
      const s = String(Math.ceil(wait / 1000));
      const known = await ctx.db.query("SELECT id FROM users WHERE email = $1", [body.email]);
      await audit(ctx.db, request, {
        userId: (known.rows[0]?.id as string | undefined) ?? null,
        action: "auth.login_throttled",
        details: { email: body.email, retry_after_s: Number(s) },
      });
      throw new ApiError(429, "Too many failed logins; try again later.", `Retry after ${s} s.`, {
        "retry-after": s,
      });
    }
    const r = await ctx.db.query("SELECT * FROM users WHERE email = $1", [body.email]);
    const row = r.rows[0];
    const ok = row
      ? await verifyPassword(body.password, row.password_hash as string)
      : await verifyPassword(body.password, await (noUserHash ??= hashPassword(randomUUID()))).then(
          () => false,
        );
    if (!row || !ok) {
      await audit(ctx.db, request, {
        userId: (row?.id as string | undefined) ?? null,
        action: "auth.login_failed",
        details: { email: body.email },
      });
      throw ApiError.coded("invalid_credentials", "Wrong email or password.");
    }
    await throttle.succeed(keys);
    if (row.disabled_at !== null) {
      await audit(ctx.db, request, {
        userId: row.id as string,
        action: "auth.login_failed",
        details: { email: body.email, reason: "user_disabled" },
      });
      throw ApiError.coded("user_disabled", "This user is disabled.", "Ask an admin to enable it.");
    }
    const { id, token } = await issueToken(ctx.db, row.id as string, "login", "session", {
      nowMs: (ctx.clock ?? realClock).now(),
    });
    await audit(ctx.db, request, { userId: row.id as string, action: "auth.login", target: id });
    setSessionCookie(request, reply, token);
    return { token };
  });

  // Ends the session the request came with (cookie or bearer) and clears the cookie.
  app.post("/api/v1/auth/logout", async (request, reply) => {
    const c = caller(request);
    await ctx.db.query("DELETE FROM api_tokens WHERE id = $1", [c.tokenId]);
    ctx.tokens.changed(); // at once here; the trigger's notification tells the other replicas
    await audit(ctx.db, request, { userId: c.user.id, action: "auth.logout", target: c.tokenId });
    setSessionCookie(request, reply, null);
    return reply.code(204).send();
  });
}
