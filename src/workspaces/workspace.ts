// A template workspace as the rest of Tether sees it: its status (from its latest build),
// whether its agent is connected, and its deadline — when it stops if nothing happens. Last
// activity is the latest of: the workspace's recorded activity (a start, an open chat stream,
// a process seen running, a turn beginning), its chats' last changes and its agent's
// connection; a chat running on it is activity now. One query answers all of it, for one workspace or for all running ones.

import type { Queryable } from "../chatd/db/index.ts";
import { rowToBuild, workspaceStatus, type Build, type WorkspaceStatus } from "./builds.ts";

export interface WorkspaceState {
  id: string;
  name: string;
  ownerId: string | null;
  /** Shared with every user (workspace-access.ts: who may run chats in it). */
  shared: boolean;
  templateId: string;
  /** The template version its compute runs (or last ran). */
  templateVersion: number | null;
  status: WorkspaceStatus;
  latestBuild: Build | undefined;
  /** Its own TTL, or the template's default; 0 = never stop. */
  ttlMs: number;
  /** A replica holds its agent's connection. */
  connected: boolean;
  /** How long the agent has been connected (database clock), when it is. */
  connectedForMs: number | undefined;
  /** A chat is running or interrupting on it. */
  busy: boolean;
  lastActiveAt: Date | undefined;
  /** When the lifecycle loop stops it, or undefined (not running, or ttl 0). */
  deadline: Date | undefined;
  /** The database's now, which `deadline` is on. */
  now: Date;
}

export const WORKSPACE_STATE_SQL = `
  SELECT w.id, w.name, w.owner_id, w.shared, w.template_id, w.template_version,
    coalesce(w.ttl_ms, t.default_ttl_ms) AS ttl_ms,
    greatest(w.last_active_at,
             (SELECT max(c.updated_at) FROM chats c WHERE c.workspace_id = w.id),
             (SELECT a.connected_at FROM agent_connections a WHERE a.workspace_id = w.id))
      AS last_active_at,
    EXISTS (SELECT 1 FROM chats c WHERE c.workspace_id = w.id
            AND c.status IN ('running', 'interrupting') AND NOT c.archived) AS busy,
    (SELECT a.connected_at FROM agent_connections a JOIN workers k ON k.id = a.worker_id
     WHERE a.workspace_id = w.id) AS connected_at,
    now() AS now,
    b.id AS b_id, b.workspace_id AS b_workspace_id, b.transition AS b_transition,
    b.reason AS b_reason, b.status AS b_status, b.template_version AS b_template_version,
    b.created_by AS b_created_by, b.worker_id AS b_worker_id, b.error AS b_error,
    b.created_at AS b_created_at, b.started_at AS b_started_at, b.finished_at AS b_finished_at
  FROM workspaces w JOIN templates t ON t.id = w.template_id
  LEFT JOIN workspace_builds b ON b.id = w.latest_build_id`;

/**
 * How long after a start an agent may take to connect. A turn waits that long for it; the
 * lifecycle loop gives a workspace whose agent has not connected yet that long before it stops
 * it (even with a shorter TTL), and then stops it, so a broken agent does not leak compute.
 */
export const AGENT_CONNECT_GRACE_MS = 2 * 60_000;

/**
 * The deadline rule, for a running workspace with a TTL: last activity (now, while busy) +
 * TTL — and, while its agent has not connected, no sooner than the connect grace after the
 * start finished.
 */
export function deadlineOf(w: {
  status: WorkspaceStatus;
  ttlMs: number;
  busy: boolean;
  lastActiveAt: Date | undefined;
  connected: boolean;
  /** When the start that made it running finished. */
  runningSince: Date | undefined;
  now: Date;
}): Date | undefined {
  if (w.status !== "running" || w.ttlMs === 0) return undefined;
  const last = w.busy || !w.lastActiveAt ? w.now : w.lastActiveAt;
  let deadline = last.getTime() + w.ttlMs;
  if (!w.connected && w.runningSince)
    deadline = Math.max(deadline, w.runningSince.getTime() + AGENT_CONNECT_GRACE_MS);
  return new Date(deadline);
}

export function rowToWorkspaceState(r: Record<string, unknown>): WorkspaceState {
  const build: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) if (k.startsWith("b_")) build[k.slice(2)] = v;
  const latestBuild = r.b_id ? rowToBuild(build) : undefined;
  // Without a build yet (never, since creation queues one) it reads as stopped.
  const status: WorkspaceStatus = latestBuild ? workspaceStatus(latestBuild) : "stopped";
  const now = r.now as Date;
  const connectedAt = (r.connected_at as Date | null) ?? undefined;
  const s = {
    id: r.id as string,
    name: r.name as string,
    ownerId: (r.owner_id as string | null) ?? null,
    shared: r.shared === true,
    templateId: r.template_id as string,
    templateVersion: (r.template_version as number | null) ?? null,
    status,
    latestBuild,
    ttlMs: Number(r.ttl_ms),
    connected: connectedAt !== undefined,
    connectedForMs: connectedAt && Math.max(0, now.getTime() - connectedAt.getTime()),
    busy: r.busy as boolean,
    lastActiveAt: (r.last_active_at as Date | null) ?? undefined,
    runningSince: latestBuild?.finishedAt ?? undefined,
    now,
  };
  return { ...s, deadline: deadlineOf(s) };
}

/** The workspace's state, or undefined when it is gone or has no template. */
export async function workspaceState(
  q: Queryable,
  workspaceId: string,
): Promise<WorkspaceState | undefined> {
  const r = await q.query(`${WORKSPACE_STATE_SQL} WHERE w.id = $1`, [workspaceId]);
  return r.rows[0] ? rowToWorkspaceState(r.rows[0]) : undefined;
}

/**
 * workspaceState, remembering in `registered` the workspaces without a template (registered by
 * URL; a workspace never changes kind): those are not read again.
 */
export async function templateWorkspaceState(
  q: Queryable,
  workspaceId: string,
  registered?: Set<string>,
): Promise<WorkspaceState | undefined> {
  if (registered?.has(workspaceId)) return undefined;
  const w = await workspaceState(q, workspaceId);
  if (!w) registered?.add(workspaceId);
  return w;
}

/** Every template workspace whose latest build is a start that succeeded. */
export async function runningWorkspaces(q: Queryable): Promise<WorkspaceState[]> {
  const r = await q.query(
    `${WORKSPACE_STATE_SQL} WHERE b.transition = 'start' AND b.status = 'succeeded' ORDER BY w.id`,
  );
  return r.rows.map(rowToWorkspaceState);
}

/** Records activity on the workspaces now (the database clock). */
export async function touchWorkspaces(q: Queryable, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await q.query(
    "UPDATE workspaces SET last_active_at = now() WHERE id = ANY($1::uuid[]) AND template_id IS NOT NULL",
    [ids],
  );
}
