// Workspaces: a name and the URL (and optional token) of a workspace agent, belonging to whoever
// registered it. A chat may run in its owner's own workspaces and the ones an admin shared (the
// local one belongs to the server's owner); admins and owners also see (and may share or
// change) everyone's. The agent token is stored sealed and never answered, logged or audited. Reading a workspace shows its
// health, the agent's `GET /api/v0/info` from a per-API cache (workspace-health.ts): a dead agent
// delays only the first read of it (bounded by a short timeout), not every list.
//
// URL rules (agent-url.ts): credentials in a URL are refused (the token goes in agent_token); a
// member's URL must resolve to public addresses only, and is marked `url_checked_as = 'member'`
// so every later connection is checked again (the AgentPool's address policy). A new URL unshares
// the workspace and, when it had a token, needs the new agent's: the old token never goes to
// the new host.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import { SLOTS } from "../chatd/secrets/index.ts";
import { usableBy } from "../chatd/workspace-access.ts";
import { realClock } from "../contract/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, isStaff } from "./auth.ts";
import { checkAgentUrl, type AgentUrlRules } from "./agent-url.ts";
import { ApiError, IdParams, notFound, parse } from "./errors.ts";
import { agentFields } from "./agent-view.ts";
import {
  createTemplateWorkspace,
  isTemplateBody,
  queueTemplateDelete,
  templateFields,
  templateWorkspaceRoutes,
  workspaceJson,
} from "./template-workspaces.ts";
import { workspaceView, type User, type WorkspaceView } from "./views.ts";
import {
  DEFAULT_HEALTH_TIMEOUT_MS,
  DEFAULT_HEALTH_TTL_MS,
  WorkspaceHealthCache,
} from "./workspace-health.ts";

const HttpUrl = z
  .string()
  .trim()
  .max(2048)
  .refine(
    (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol),
    "must be an http(s) URL",
  );

const WorkspaceName = z.string().trim().min(1, "must not be empty").max(200);
const AgentToken = z.string().min(1, "must not be empty").max(4096);

export const NewWorkspaceBody = z.object({
  name: WorkspaceName,
  agent_url: HttpUrl,
  agent_token: AgentToken.optional(),
});

/** `shared` is for admins and owners only; `agent_token: null` clears the token. */
export const WorkspacePatch = z.object({
  name: WorkspaceName.optional(),
  agent_url: HttpUrl.optional(),
  agent_token: AgentToken.nullable().optional(),
  shared: z.boolean().optional(),
});

/**
 * `true` when a chat of `user` may run in the workspace row (one without an owner: nobody's).
 * The worker asks the same before every tool batch (chatd/workspace-access.ts).
 */
export function canUseWorkspace(user: User, row: Record<string, unknown>): boolean {
  return usableBy(user.id, row);
}

/** `true` when `user` may see (and change) the workspace row. */
function canSeeWorkspace(user: User, row: Record<string, unknown>): boolean {
  return isStaff(user) || canUseWorkspace(user, row);
}

/** The workspace if it exists and a chat of `user` may run in it. */
export async function findWorkspace(
  q: Queryable,
  user: User,
  id: string,
): Promise<Record<string, unknown> | undefined> {
  const r = await q.query("SELECT * FROM workspaces WHERE id = $1", [id]);
  const row = r.rows[0];
  return row && canUseWorkspace(user, row) ? row : undefined;
}

/**
 * The workspace row if `user` may see it, locked for the transaction's change when `forUpdate`;
 * 404 otherwise.
 */
async function visibleWorkspace(
  q: Queryable,
  user: User,
  id: string,
  forUpdate = false,
): Promise<Record<string, unknown>> {
  const r = await q.query(
    `SELECT * FROM workspaces WHERE id = $1${forUpdate ? " FOR UPDATE" : ""}`,
    [id],
  );
  const row = r.rows[0];
  if (!row || !canSeeWorkspace(user, row)) throw notFound("Workspace", id);
  return row;
}

export function workspaceRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const health = new WorkspaceHealthCache({
    timeoutMs: ctx.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS,
    ttlMs: ctx.healthTtlMs ?? DEFAULT_HEALTH_TTL_MS,
    clock: ctx.healthClock ?? realClock,
    ...(ctx.memberAgentAddresses && { memberAgentAddresses: ctx.memberAgentAddresses }),
  });
  const urlRules: AgentUrlRules = {
    ...(ctx.memberAgentAddresses && { allow: ctx.memberAgentAddresses }),
    ...(ctx.resolveHost && { resolve: ctx.resolveHost }),
  };
  app.addHook("onClose", async () => health.close());
  // Every workspace reports its agent (a health check of its URL, or the dial-out registry); a
  // template workspace adds its lifecycle fields.
  const withHealth = async (row: Record<string, unknown>): Promise<WorkspaceView> => ({
    ...workspaceView(row),
    ...(await agentFields(ctx.db, row, (r) =>
      health.health({ ...r, agent_token: agentTokenOf(r) }),
    )),
    ...(await templateFields(ctx.db, row)),
  });
  templateWorkspaceRoutes(app, ctx, canSeeWorkspace);
  // A token this server cannot open (sealed with a key it lacks) is checked as none: the
  // agent answers unauthorized, and the list still answers.
  const agentTokenOf = (row: Record<string, unknown>): string | null => {
    try {
      return ctx.secrets.openOrNull(
        row.agent_token as string | null,
        SLOTS.agentToken(row.id as string),
      );
    } catch {
      return null;
    }
  };

  app.post("/api/v1/workspaces", async (request, reply) => {
    if (isTemplateBody(request.body)) return createTemplateWorkspace(ctx, request, reply);
    const { user } = caller(request);
    const body = parse(NewWorkspaceBody, request.body, "body");
    const checkedAs = await checkAgentUrl(urlRules, isStaff(user), body.agent_url);
    const id = randomUUID();
    const row = await ctx.db.transaction(async (tx) => {
      const r = await tx.query(
        `INSERT INTO workspaces (id, owner_id, name, agent_url, agent_token, url_checked_as)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
        [
          id,
          user.id,
          body.name,
          body.agent_url,
          ctx.secrets.sealOrNull(body.agent_token, SLOTS.agentToken(id)),
          checkedAs,
        ],
      );
      const row = r.rows[0]!;
      await audit(tx, request, {
        userId: user.id,
        action: "workspace.create",
        target: row.id as string,
        details: { name: body.name, agent_url: body.agent_url },
      });
      return row;
    });
    return reply.code(201).send(workspaceView(row));
  });

  app.get("/api/v1/workspaces", async (request) => {
    const { user } = caller(request);
    const r = await ctx.db.query(
      `SELECT * FROM workspaces WHERE $1 OR shared OR owner_id = $2
       ORDER BY is_default DESC, created_at, id`,
      [isStaff(user), user.id],
    );
    return { workspaces: await Promise.all(r.rows.map(withHealth)) };
  });

  app.get("/api/v1/workspaces/:id", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    return withHealth(await visibleWorkspace(ctx.db, user, id));
  });

  // Its owner (or an admin or owner) changes a workspace; only those share it. The local
  // workspace belongs to the server's owner.
  app.patch("/api/v1/workspaces/:id", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(WorkspacePatch, request.body, "body");
    const refuseTemplateAgent = (w: Record<string, unknown>) => {
      if (w.template_id && (body.agent_url !== undefined || body.agent_token !== undefined))
        throw new ApiError(400, "A template workspace's agent dials in: it has no URL or token.");
    };
    // Checked (and resolved) before the row is locked; whether it is a new URL is known inside.
    // A template workspace (template_id never changes) has no URL to check.
    let checkedAs: string | undefined;
    if (body.agent_url !== undefined) {
      refuseTemplateAgent(await visibleWorkspace(ctx.db, user, id, false));
      checkedAs = await checkAgentUrl(urlRules, isStaff(user), body.agent_url);
    }
    const row = await ctx.db.transaction(async (tx) => {
      const old = await visibleWorkspace(tx, user, id, true);
      if (!isStaff(user) && (old.owner_id !== user.id || body.shared !== undefined)) {
        throw new ApiError(403, "Only its owner changes a workspace; only an admin shares one.");
      }
      refuseTemplateAgent(old);
      const repointed = body.agent_url !== undefined && body.agent_url !== old.agent_url;
      if (repointed && body.agent_token === undefined && old.agent_token !== null) {
        throw ApiError.coded(
          "agent_token_required",
          "A new agent URL needs the new agent's token: send the new agent's agent_token.",
          "agent_token: the new agent's token, or null for an agent without one; the old token is never sent to a new URL",
        );
      }
      const u = await tx.query(
        `UPDATE workspaces SET name = coalesce($2, name), agent_url = coalesce($3, agent_url),
           agent_token = CASE WHEN $4 THEN $5 ELSE agent_token END, shared = coalesce($6, shared),
           url_checked_as = CASE WHEN $7 THEN $8 ELSE url_checked_as END
         WHERE id = $1 RETURNING *`,
        [
          id,
          body.name ?? null,
          repointed ? body.agent_url : null,
          body.agent_token !== undefined,
          ctx.secrets.sealOrNull(body.agent_token, SLOTS.agentToken(id)),
          // Whoever uses the workspace agreed to its old agent, not the new one: unshared.
          body.shared ?? (repointed ? false : null),
          repointed,
          checkedAs ?? null,
        ],
      );
      const details: Record<string, unknown> = {};
      if (body.name !== undefined) details.name = body.name;
      if (repointed) details.agent_url = body.agent_url;
      if (repointed && old.shared === true && body.shared === undefined) details.shared = false;
      if (body.agent_token !== undefined)
        details.agent_token = body.agent_token ? "set" : "cleared";
      if (body.shared !== undefined) details.shared = body.shared;
      await audit(tx, request, {
        userId: user.id,
        action: "workspace.update",
        target: id,
        details,
      });
      return u.rows[0]!;
    });
    // A new URL or token already misses the cache; any change is also a cue to look again.
    health.forget(id);
    return workspaceJson(ctx.db, row);
  });

  // Its owner (or an admin or owner) deletes a workspace, unless a chat is running in it. Chats
  // that used it keep their history; their later tool calls answer that the chat has no
  // workspace. The server's local workspace comes back at the server's next start. A template
  // workspace is deleted by a delete build (202): it goes once `terraform destroy` succeeded.
  app.delete("/api/v1/workspaces/:id", async (request, reply) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const queued = await ctx.db.transaction(async (tx) => {
      const row = await visibleWorkspace(tx, user, id, true);
      if (!isStaff(user) && row.owner_id !== user.id)
        throw new ApiError(403, "Only its owner or an admin deletes a workspace.");
      const busy = await tx.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM chats WHERE workspace_id = $1 AND status IN ('running', 'interrupting')",
        [id],
      );
      const n = busy.rows[0]!.n;
      if (n > 0) {
        throw ApiError.coded(
          "workspace_busy",
          `${n} chat${n === 1 ? " is" : "s are"} running in this workspace.`,
          "Interrupt them or wait for them to finish, then delete it.",
        );
      }
      if (row.template_id) await queueTemplateDelete(tx, id, user);
      else await tx.query("DELETE FROM workspaces WHERE id = $1", [id]);
      await audit(tx, request, {
        userId: user.id,
        action: "workspace.delete",
        target: id,
        details: { name: row.name },
      });
      return row.template_id ? row : undefined;
    });
    health.forget(id);
    if (queued) return reply.code(202).send(await workspaceJson(ctx.db, queued));
    return reply.code(204).send();
  });
}
