// When a workspace's compute ran, for usage: a run opens when a start succeeds and closes when
// the stop or delete after it succeeds (a failed stop leaves it open: the compute may still be
// up). Runs outlive their workspace; time is split per owner and per day or hour on reading.

import type { Queryable } from "../chatd/db/index.ts";

/** Opens a run for the workspace unless one is open (call inside the build's transaction). */
export async function openRun(q: Queryable, workspaceId: string): Promise<void> {
  await q.query(
    `INSERT INTO workspace_runs (workspace_id, workspace_name, owner_id, started_at)
     SELECT w.id, w.name, w.owner_id, now() FROM workspaces w
     WHERE w.id = $1 AND NOT EXISTS (
       SELECT 1 FROM workspace_runs r WHERE r.workspace_id = w.id AND r.stopped_at IS NULL)`,
    [workspaceId],
  );
}

export async function closeRun(q: Queryable, workspaceId: string): Promise<void> {
  await q.query(
    "UPDATE workspace_runs SET stopped_at = now() WHERE workspace_id = $1 AND stopped_at IS NULL",
    [workspaceId],
  );
}

export interface RunInterval {
  workspaceId: string;
  workspaceName: string;
  ownerId: string | null;
  startedAt: Date;
  /** null while it runs. */
  stoppedAt: Date | null;
}

/** The runs that overlap [from, to) (either end open), with the database's now. */
export async function runsBetween(
  q: Queryable,
  f: { from?: Date; to?: Date; ownerId?: string },
): Promise<{ runs: RunInterval[]; now: Date }> {
  const r = await q.query<{
    workspace_id: string;
    workspace_name: string;
    owner_id: string | null;
    started_at: Date;
    stopped_at: Date | null;
    now: Date;
  }>(
    `SELECT workspace_id, workspace_name, owner_id, started_at, stopped_at, now() AS now
     FROM workspace_runs
     WHERE ($1::timestamptz IS NULL OR stopped_at IS NULL OR stopped_at > $1)
       AND ($2::timestamptz IS NULL OR started_at < $2)
       AND ($3::uuid IS NULL OR owner_id = $3)
     ORDER BY started_at`,
    [f.from ?? null, f.to ?? null, f.ownerId ?? null],
  );
  const now = r.rows[0]?.now ?? (await q.query<{ now: Date }>("SELECT now() AS now")).rows[0]!.now;
  return {
    now,
    runs: r.rows.map((x) => ({
      workspaceId: x.workspace_id,
      workspaceName: x.workspace_name,
      ownerId: x.owner_id,
      startedAt: x.started_at,
      stoppedAt: x.stopped_at,
    })),
  };
}

export type RunBucket = "day" | "hour";

/**
 * Running time in ms per (owner, bucket start) — runs clipped to [from, to) and split at
 * bucket boundaries (UTC); an open run counts until `now`.
 */
export function runningTime(
  runs: RunInterval[],
  o: { from?: Date; to?: Date; now: Date; bucket?: RunBucket },
): Map<string, { ownerId: string | null; bucket: string | null; ms: number }> {
  const out = new Map<string, { ownerId: string | null; bucket: string | null; ms: number }>();
  const step = o.bucket === "hour" ? 3_600_000 : 86_400_000;
  for (const run of runs) {
    let start = Math.max(run.startedAt.getTime(), o.from?.getTime() ?? -Infinity);
    const end = Math.min(
      (run.stoppedAt ?? o.now).getTime(),
      o.to?.getTime() ?? Infinity,
      o.now.getTime(),
    );
    while (start < end) {
      const bucketStart = o.bucket ? Math.floor(start / step) * step : undefined;
      const stop = bucketStart === undefined ? end : Math.min(end, bucketStart + step);
      const bucket =
        bucketStart === undefined
          ? null
          : o.bucket === "hour"
            ? new Date(bucketStart).toISOString().replace(/:\d\d\.\d{3}Z$/, ":00Z")
            : new Date(bucketStart).toISOString().slice(0, 10);
      const key = `${run.ownerId ?? ""} ${bucket ?? ""}`;
      const e = out.get(key) ?? { ownerId: run.ownerId, bucket, ms: 0 };
      e.ms += stop - start;
      out.set(key, e);
      start = stop;
    }
  }
  return out;
}
