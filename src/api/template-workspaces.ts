// Workspaces made from templates: create (its first build, a start, is queued), start, stop,
// delete (a delete build; the workspace is gone once it succeeded), their builds and build
// logs, and the fields their JSON adds — status, template_id, ttl_ms, deadline, agent,
// latest_build. A stop or delete is refused while a chat runs on the workspace (interrupt it
// first), and any build is refused while another is pending or running (one at a time). A
// member's ttl_ms keeps within the template's max_ttl_ms (admins and owners are exempt).

import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import {
  BuildInProgressError,
  buildLog,
  getBuild,
  listBuilds,
  queueBuild,
  workspaceState,
  type Build,
  type BuildTransition,
  type WorkspaceState,
  withinMaxTtl,
} from "../workspaces/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, isStaff } from "./auth.ts";
import { ApiError, IdParams, notFound, parse, Uuid } from "./errors.ts";
import { workspaceView, type User } from "./views.ts";

/** Who may see (and start) a workspace row: the rule of workspaces.ts, passed in. */
export type CanSeeWorkspace = (user: User, row: Record<string, unknown>) => boolean;

/** A TTL: 0 (never stop) or at least a second, at most 30 days. */
const TtlMs = z
  .number()
  .int()
  .min(0)
  .max(30 * 86_400_000)
  .refine((n) => n === 0 || n >= 1_000, "must be 0 (never stop) or at least 1000");

export const NewTemplateWorkspaceBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(200),
  template_id: Uuid,
  ttl_ms: TtlMs.optional(),
});

export const BuildParams = z.object({ id: Uuid, build_id: Uuid });

/** The body asks for a workspace from a template (rather than one registered by URL). */
export function isTemplateBody(body: unknown): boolean {
  return typeof body === "object" && body !== null && "template_id" in body;
}

export interface BuildView {
  id: string;
  transition: BuildTransition;
  reason: Build["reason"];
  status: Build["status"];
  template_version: number;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  error?: string;
}

export function buildView(b: Build): BuildView {
  return {
    id: b.id,
    transition: b.transition,
    reason: b.reason,
    status: b.status,
    template_version: b.templateVersion,
    created_at: b.createdAt.toISOString(),
    ...(b.startedAt && { started_at: b.startedAt.toISOString() }),
    ...(b.finishedAt && { finished_at: b.finishedAt.toISOString() }),
    ...(b.error !== null && { error: b.error }),
  };
}

/** What a template workspace's JSON adds to the registered workspace's fields. */
export interface TemplateWorkspaceFields {
  status: WorkspaceState["status"];
  template_id: string;
  template_version: number | null;
  ttl_ms: number;
  deadline: string | null;
  agent: { connected: boolean };
  latest_build: BuildView | null;
}

export function templateFieldsOf(w: WorkspaceState): TemplateWorkspaceFields {
  return {
    status: w.status,
    template_id: w.templateId,
    template_version: w.templateVersion,
    ttl_ms: w.ttlMs,
    deadline: w.deadline?.toISOString() ?? null,
    agent: { connected: w.connected },
    latest_build: w.latestBuild ? buildView(w.latestBuild) : null,
  };
}

/** The template fields of a workspace row, or undefined for a registered workspace. */
export async function templateFields(
  q: Queryable,
  row: Record<string, unknown>,
): Promise<TemplateWorkspaceFields | undefined> {
  if (!row.template_id) return undefined;
  const w = await workspaceState(q, row.id as string);
  return w && templateFieldsOf(w);
}

async function view(q: Queryable, row: Record<string, unknown>) {
  return { ...workspaceView(row), ...(await templateFields(q, row)) };
}

/**
 * A template workspace `user` may see, locked when `forUpdate`; 404 for anything else. `act`
 * says what the user means to do: `see` (read or start it: whoever may see it), `own` (stop
 * it: its owner, an admin or the owner), `logs` (read a build's log: the same as `own` — a
 * log holds what Terraform printed of the owner's resources, which a shared workspace's other
 * users are not shown).
 */
async function templateWorkspace(
  q: Queryable,
  canSee: CanSeeWorkspace,
  user: User,
  id: string,
  act: "see" | "own" | "logs",
  forUpdate = false,
): Promise<Record<string, unknown>> {
  const r = await q.query(
    `SELECT * FROM workspaces WHERE id = $1${forUpdate ? " FOR UPDATE" : ""}`,
    [id],
  );
  const row = r.rows[0];
  if (!row || !canSee(user, row)) throw notFound("Workspace", id);
  if (!row.template_id)
    throw new ApiError(
      409,
      "This workspace is registered by URL, not made from a template.",
      "Only template workspaces have builds, start and stop.",
    );
  if (act !== "see" && !isStaff(user) && row.owner_id !== user.id)
    throw new ApiError(
      403,
      act === "logs"
        ? "Only its owner or an admin reads a workspace's build logs."
        : "Only its owner or an admin stops or deletes a workspace.",
    );
  return row;
}

/** 409 unless no chat runs on the workspace. */
async function refuseWhileChatsRun(q: Queryable, id: string, what: string): Promise<void> {
  const busy = await q.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM chats WHERE workspace_id = $1 AND status IN ('running', 'interrupting')",
    [id],
  );
  const n = busy.rows[0]!.n;
  if (n > 0)
    throw new ApiError(
      409,
      `${n} chat${n === 1 ? " is" : "s are"} running on this workspace.`,
      `Interrupt ${n === 1 ? "it" : "them"} or wait for ${n === 1 ? "it" : "them"} to finish, then ${what} it.`,
    );
}

/** Queues a build, answering 409 when one is already pending or running. */
async function queue(
  q: Queryable,
  workspaceId: string,
  transition: BuildTransition,
  user: User,
): Promise<Build> {
  try {
    return await queueBuild(q, { workspaceId, transition, reason: "user", createdBy: user.id });
  } catch (err) {
    if (err instanceof BuildInProgressError)
      throw new ApiError(
        409,
        err.message,
        "One build runs at a time per workspace: wait for it to finish (GET …/builds).",
      );
    throw err;
  }
}

/** The 400 for a member's ttl_ms the template's max_ttl_ms does not allow. */
function ttlAboveMax(ttlMs: number, maxTtlMs: number): ApiError {
  return ApiError.coded(
    "invalid_body",
    ttlMs === 0
      ? `This template's workspaces stop when idle: ttl_ms 0 (never stop) is not allowed; its max_ttl_ms is ${maxTtlMs}.`
      : `ttl_ms ${ttlMs} is above this template's max_ttl_ms (${maxTtlMs}).`,
    `ttl_ms: at most ${maxTtlMs}, and not 0; leave it out for the template's default_ttl_ms`,
  );
}

/** `POST /api/v1/workspaces` with a template_id: the workspace and its first start. */
export async function createTemplateWorkspace(
  ctx: ApiContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const { user } = caller(request);
  const body = parse(NewTemplateWorkspaceBody, request.body, "body");
  const row = await ctx.db.transaction(async (tx) => {
    const t = await tx.query<{ max_ttl_ms: string | number | null }>(
      "SELECT max_ttl_ms FROM templates WHERE id = $1 FOR SHARE",
      [body.template_id],
    );
    if (!t.rows[0]) throw notFound("Template", body.template_id, "template_id");
    // Without ttl_ms the template's default applies, which keeps within its cap.
    const max = t.rows[0].max_ttl_ms === null ? null : Number(t.rows[0].max_ttl_ms);
    if (body.ttl_ms !== undefined && !isStaff(user) && !withinMaxTtl(body.ttl_ms, max))
      throw ttlAboveMax(body.ttl_ms, max!);
    const id = randomUUID();
    await tx.query(
      `INSERT INTO workspaces (id, owner_id, name, template_id, ttl_ms) VALUES ($1, $2, $3, $4, $5)`,
      [id, user.id, body.name, body.template_id, body.ttl_ms ?? null],
    );
    await queueBuild(tx, {
      workspaceId: id,
      transition: "start",
      reason: "user",
      createdBy: user.id,
    });
    await audit(tx, request, {
      userId: user.id,
      action: "workspace.create",
      target: id,
      details: { name: body.name, template_id: body.template_id },
    });
    return (await tx.query("SELECT * FROM workspaces WHERE id = $1", [id])).rows[0]!;
  });
  return reply.code(201).send(await view(ctx.db, row));
}

/**
 * The delete of a template workspace (`DELETE /api/v1/workspaces/{id}` answers 202): a delete
 * build, queued inside the route's transaction once it checked the caller and the chats.
 */
export async function queueTemplateDelete(tx: Queryable, id: string, user: User): Promise<Build> {
  return queue(tx, id, "delete", user);
}

/** The JSON of a workspace row, template fields included. */
export async function workspaceJson(q: Queryable, row: Record<string, unknown>) {
  return view(q, row);
}

/** The routes only template workspaces have; `canSee` is the visibility rule of workspaces.ts. */
export function templateWorkspaceRoutes(
  app: FastifyInstance,
  ctx: ApiContext,
  canSee: CanSeeWorkspace,
): void {
  for (const transition of ["start", "stop"] as const) {
    app.post(`/api/v1/workspaces/:id/${transition}`, async (request, reply) => {
      const { user } = caller(request);
      const { id } = parse(IdParams, request.params, "path");
      const row = await ctx.db.transaction(async (tx) => {
        const row = await templateWorkspace(
          tx,
          canSee,
          user,
          id,
          transition === "start" ? "see" : "own",
          true,
        );
        const w = await workspaceState(tx, id);
        if (transition === "start" && (w?.status === "running" || w?.status === "starting"))
          throw new ApiError(409, "The workspace is already running or starting.");
        if (transition === "stop") {
          if (w?.status === "stopped" || w?.status === "stopping")
            throw new ApiError(409, "The workspace is already stopped or stopping.");
          await refuseWhileChatsRun(tx, id, "stop");
        }
        await queue(tx, id, transition, user);
        await audit(tx, request, {
          userId: user.id,
          action: `workspace.${transition}`,
          target: id,
        });
        return row;
      });
      return reply.code(202).send(await view(ctx.db, row));
    });
  }

  app.get("/api/v1/workspaces/:id/builds", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    await templateWorkspace(ctx.db, canSee, user, id, "see");
    return { builds: (await listBuilds(ctx.db, id)).map(buildView) };
  });

  app.get("/api/v1/workspaces/:id/builds/:build_id/logs", async (request, reply) => {
    const { user } = caller(request);
    const { id, build_id } = parse(BuildParams, request.params, "path");
    await templateWorkspace(ctx.db, canSee, user, id, "logs");
    const b = await getBuild(ctx.db, build_id);
    if (!b || b.workspaceId !== id) throw notFound("Build", build_id);
    return reply
      .type("text/plain; charset=utf-8")
      .header("cache-control", "no-store")
      .header("x-build-status", b.status)
      .send(await buildLog(ctx.db, build_id));
  });
}
