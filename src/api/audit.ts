// The audit log: who (user ID) did what (action, target, details) when and from where (client
// address, user agent). Callers pass details without secrets; `GET /api/v1/audit` pages it
// newest first for admins and owners.

import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import type { ChangePart } from "../chatd/transitions/index.ts";
import { toStorableText } from "../chatd/storable-text.ts";
import type { ApiContext } from "./context.ts";
import { staff } from "./auth.ts";
import { Int64String, parse } from "./errors.ts";
import { auditEntryView } from "./views.ts";

export type AuditAction =
  | "auth.login"
  | "auth.login_failed"
  | "auth.login_throttled"
  | "auth.logout"
  | "user.create"
  | "user.role"
  | "user.disable"
  | "user.enable"
  | "user.password"
  | "user.password_failed"
  | "token.create"
  | "token.revoke"
  | "model.create"
  | "model.update"
  | "model.delete"
  | "workspace.create"
  | "workspace.update"
  | "workspace.delete"
  | "workspace.start"
  | "workspace.stop"
  | "template.create"
  | "template.update"
  | "template.delete"
  | "chat.create"
  | "chat.message"
  | "chat.staff_read"
  | "chat.interrupt"
  | "chat.edit"
  | "chat.unqueue"
  | "chat.update"
  | "chat.refresh_context"
  | "chat.compact"
  | "settings.instructions"
  | "process.signal"
  | "tool.call";

export interface AuditEntry {
  userId: string | null;
  action: AuditAction;
  target?: string;
  details?: Record<string, unknown>;
}

/**
 * The request's client address, made storable: behind a trusted proxy it is whatever
 * X-Forwarded-For said, which no parser checked.
 */
export function clientAddress(request: FastifyRequest): string {
  return toStorableText(request.ip.slice(0, 100));
}

/** The entry's column values, with the request's client address and user agent. */
function auditRow(request: FastifyRequest, e: Omit<AuditEntry, "target">): unknown[] {
  const agent = request.headers["user-agent"];
  return [
    e.userId,
    e.action,
    JSON.stringify(e.details ?? {}),
    clientAddress(request),
    typeof agent === "string" ? toStorableText(agent.slice(0, 500)) : null,
  ];
}

/**
 * Records one entry, with the request's client address and user agent: headers, so made
 * storable (a NUL or an unpaired surrogate becomes U+FFFD) rather than failing the insert.
 */
export async function audit(q: Queryable, request: FastifyRequest, e: AuditEntry): Promise<void> {
  const [userId, action, details, ip, agent] = auditRow(request, e);
  await q.query(
    `INSERT INTO audit_log (user_id, action, target, details, ip, user_agent)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [userId, action, e.target ?? null, details, ip, agent],
  );
}

/**
 * The entry as a write riding along on a chatd statement (ChangePart) whose CTE `c` holds the
 * row it is about: its target is `c.id`, and it is written only with that row.
 */
export function auditPart(request: FastifyRequest, e: Omit<AuditEntry, "target">): ChangePart {
  const [userId, action, details, ip, agent] = auditRow(request, e);
  return (p) => ({
    ctes: [
      `audited AS (INSERT INTO audit_log (user_id, action, target, details, ip, user_agent)
       SELECT ${p(userId)}::uuid, ${p(action)}::text, c.id::text, ${p(details)}::jsonb,
         ${p(ip)}::text, ${p(agent)}::text FROM c)`,
    ],
  });
}

export const AuditQuery = z.object({
  before: Int64String.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

export function auditRoutes(app: FastifyInstance, ctx: ApiContext): void {
  // Newest first; `before` is the last entry ID of the previous page.
  app.get("/api/v1/audit", async (request) => {
    staff(request);
    const q = parse(AuditQuery, request.query, "query");
    const r = await ctx.db.query(
      `SELECT * FROM audit_log WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`,
      [q.before ?? null, q.limit],
    );
    return { entries: r.rows.map(auditEntryView) };
  });
}
