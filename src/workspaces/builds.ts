// Builds: the durable jobs that run a template's Terraform for a workspace — start, stop or
// delete. At most one build per workspace is pending or running (a unique index), so a
// workspace's builds never overlap. A running build is leased like a chat: the replica that
// claimed it renews `heartbeat_at`, and one whose lease expired is ended `failed` by whichever
// replica looks first, so a dead replica never leaves a workspace stuck. Every write of a
// running build is fenced on the worker that holds it.

import { randomUUID } from "node:crypto";
import { toStorableText } from "../chatd/storable-text.ts";
import type { Queryable } from "../chatd/db/index.ts";

/** LISTEN/NOTIFY channel of workspace changes; the payload is a JSON {@link WorkspaceChange}. */
export const WORKSPACE_CHANNEL = "tether_workspaces";

export interface WorkspaceChange {
  workspace_id: string;
  build_id: string;
  build_status: BuildStatus;
}

export type BuildTransition = "start" | "stop" | "delete";
export type BuildReason = "user" | "autostop" | "chat";
export type BuildStatus = "pending" | "running" | "succeeded" | "failed";
export type WorkspaceStatus =
  "starting" | "running" | "stopping" | "stopped" | "deleting" | "failed";

export interface Build {
  id: string;
  workspaceId: string;
  transition: BuildTransition;
  reason: BuildReason;
  status: BuildStatus;
  templateVersion: number;
  createdBy: string | null;
  workerId: string | null;
  error: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export function rowToBuild(r: Record<string, unknown>): Build {
  return {
    id: r.id as string,
    workspaceId: r.workspace_id as string,
    transition: r.transition as BuildTransition,
    reason: r.reason as BuildReason,
    status: r.status as BuildStatus,
    templateVersion: r.template_version as number,
    createdBy: (r.created_by as string | null) ?? null,
    workerId: (r.worker_id as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    createdAt: r.created_at as Date,
    startedAt: (r.started_at as Date | null) ?? null,
    finishedAt: (r.finished_at as Date | null) ?? null,
  };
}

/** A template workspace's status follows from its latest build. */
export function workspaceStatus(latest: Pick<Build, "transition" | "status">): WorkspaceStatus {
  switch (latest.status) {
    case "failed":
      return "failed";
    case "pending":
    case "running":
      return latest.transition === "start"
        ? "starting"
        : latest.transition === "stop"
          ? "stopping"
          : "deleting";
    case "succeeded":
      // A workspace whose delete succeeded is gone; until its row goes it reads as deleting.
      return latest.transition === "start"
        ? "running"
        : latest.transition === "stop"
          ? "stopped"
          : "deleting";
    default: {
      const never: never = latest.status;
      throw new Error(`unknown build status ${String(never)}`);
    }
  }
}

/** A build is pending or running for the workspace. */
export class BuildInProgressError extends Error {
  override readonly name = "BuildInProgressError";
  constructor(readonly build: Build) {
    super(`A ${build.transition} build of this workspace is ${build.status}.`);
  }
}

export async function notifyWorkspace(q: Queryable, b: Build): Promise<void> {
  const change: WorkspaceChange = {
    workspace_id: b.workspaceId,
    build_id: b.id,
    build_status: b.status,
  };
  await q.query("SELECT pg_notify($1, $2)", [WORKSPACE_CHANNEL, JSON.stringify(change)]);
}

/** The workspace's latest build, if it has one. */
export async function latestBuild(q: Queryable, workspaceId: string): Promise<Build | undefined> {
  const r = await q.query(
    `SELECT b.* FROM workspace_builds b JOIN workspaces w ON w.latest_build_id = b.id
     WHERE w.id = $1`,
    [workspaceId],
  );
  return r.rows[0] ? rowToBuild(r.rows[0]) : undefined;
}

/**
 * Queues a build (call inside a transaction that locked the workspace row). A start takes the
 * template's newest version; a stop or delete the version the workspace runs. Throws
 * BuildInProgressError when a build is already pending or running.
 */
export async function queueBuild(
  q: Queryable,
  b: {
    workspaceId: string;
    transition: BuildTransition;
    reason: BuildReason;
    createdBy: string | null;
  },
): Promise<Build> {
  const active = await q.query(
    "SELECT * FROM workspace_builds WHERE workspace_id = $1 AND status IN ('pending', 'running')",
    [b.workspaceId],
  );
  if (active.rows[0]) throw new BuildInProgressError(rowToBuild(active.rows[0]));
  const v = await q.query<{ version: number }>(
    b.transition === "start"
      ? `UPDATE workspaces w SET template_version = t.version FROM templates t
         WHERE w.id = $1 AND t.id = w.template_id RETURNING t.version`
      : "SELECT template_version AS version FROM workspaces WHERE id = $1",
    [b.workspaceId],
  );
  const version = v.rows[0]?.version;
  if (version === undefined || version === null)
    throw new Error(`Workspace ${b.workspaceId} has no template version to build.`);
  const r = await q.query(
    `INSERT INTO workspace_builds (id, workspace_id, transition, reason, template_version, created_by)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
    [randomUUID(), b.workspaceId, b.transition, b.reason, version, b.createdBy],
  );
  const build = rowToBuild(r.rows[0]!);
  await q.query("UPDATE workspaces SET latest_build_id = $2 WHERE id = $1", [
    b.workspaceId,
    build.id,
  ]);
  await notifyWorkspace(q, build);
  return build;
}

/** The workspace's builds, newest first. */
export async function listBuilds(q: Queryable, workspaceId: string, limit = 100): Promise<Build[]> {
  const r = await q.query(
    "SELECT * FROM workspace_builds WHERE workspace_id = $1 ORDER BY created_at DESC, id LIMIT $2",
    [workspaceId, limit],
  );
  return r.rows.map(rowToBuild);
}

export async function getBuild(q: Queryable, id: string): Promise<Build | undefined> {
  const r = await q.query("SELECT * FROM workspace_builds WHERE id = $1", [id]);
  return r.rows[0] ? rowToBuild(r.rows[0]) : undefined;
}

/** Claims up to `limit` pending builds for `workerId`, oldest first, each with a fresh lease. */
export async function claimBuilds(q: Queryable, workerId: string, limit: number): Promise<Build[]> {
  if (limit <= 0) return [];
  const r = await q.query(
    `UPDATE workspace_builds SET status = 'running', worker_id = $1, heartbeat_at = now(),
       started_at = now()
     WHERE id IN (SELECT id FROM workspace_builds WHERE status = 'pending'
                  ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [workerId, limit],
  );
  const builds = r.rows.map(rowToBuild);
  for (const b of builds) await notifyWorkspace(q, b);
  return builds;
}

/** Renews the leases of `ids` held by `workerId`; answers the IDs it still holds. */
export async function renewBuilds(
  q: Queryable,
  workerId: string,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const r = await q.query<{ id: string }>(
    `UPDATE workspace_builds SET heartbeat_at = now()
     WHERE id = ANY($2::uuid[]) AND worker_id = $1 AND status = 'running' RETURNING id`,
    [workerId, ids],
  );
  return new Set(r.rows.map((x) => x.id));
}

/** What ends a build whose replica stopped renewing it. */
export const LEASE_EXPIRED_ERROR =
  "The server replica running this build stopped before it finished (its lease expired). Start the workspace again: the next build applies from the last saved state.";

/**
 * Ends `failed` every running build whose lease is older than `leaseMs` (or, with `all`, every
 * running build: the only replica starting on its own database), and answers them.
 */
export async function expireBuilds(
  q: Queryable,
  leaseMs: number,
  o: { all?: boolean } = {},
): Promise<Build[]> {
  const r = await q.query(
    `UPDATE workspace_builds SET status = 'failed', finished_at = now(), error = $3
     WHERE status = 'running'
       AND ($2 OR heartbeat_at < now() - make_interval(secs => $1::float8 / 1000))
     RETURNING *`,
    [leaseMs, o.all ?? false, LEASE_EXPIRED_ERROR],
  );
  const builds = r.rows.map(rowToBuild);
  for (const b of builds) await notifyWorkspace(q, b);
  return builds;
}

/**
 * Ends a running build held by `workerId` (call inside a transaction); false when the lease is
 * no longer ours (the build was expired meanwhile) and nothing was written.
 */
export async function finishBuild(
  q: Queryable,
  build: Build,
  workerId: string,
  outcome: { status: "succeeded" } | { status: "failed"; error: string },
): Promise<boolean> {
  const r = await q.query(
    `UPDATE workspace_builds SET status = $3, error = $4, finished_at = now()
     WHERE id = $1 AND worker_id = $2 AND status = 'running' RETURNING *`,
    [build.id, workerId, outcome.status, outcome.status === "failed" ? outcome.error : null],
  );
  if (!r.rows[0]) return false;
  await notifyWorkspace(q, rowToBuild(r.rows[0]));
  return true;
}

/**
 * Appends output to a build's log, made storable first: a NUL a provisioner printed (or an
 * unpaired surrogate) becomes U+FFFD, where it would fail the insert — and, retried with every
 * later batch, lose the rest of the log.
 */
export async function appendBuildLog(q: Queryable, buildId: string, chunk: string): Promise<void> {
  if (chunk === "") return;
  await q.query("INSERT INTO workspace_build_logs (build_id, chunk) VALUES ($1, $2)", [
    buildId,
    toStorableText(chunk),
  ]);
}

/** A build's log so far. */
export async function buildLog(q: Queryable, buildId: string): Promise<string> {
  const r = await q.query<{ chunk: string }>(
    "SELECT chunk FROM workspace_build_logs WHERE build_id = $1 ORDER BY id",
    [buildId],
  );
  return r.rows.map((x) => x.chunk).join("");
}
