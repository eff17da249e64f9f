// Workspace running time in the usage report: how long each user's template workspaces ran
// (workspace_runs), per user, per day or per hour — idle workspaces are what costs money. It
// is added to the report's rows as `workspace_runtime_ms`, with a row of its own for a user or
// a period that has running time but no chat usage.

import type { Queryable } from "../chatd/db/index.ts";
import { runningTime, runsBetween, type RunBucket } from "../workspaces/index.ts";

export interface WorkspaceTimeFilter {
  ownerId?: string;
  from?: Date;
  to?: Date;
}

/** Running time in ms keyed like the report's rows: the owner's ID, or the day or hour. */
export async function workspaceTime(
  q: Queryable,
  group: "user" | RunBucket,
  f: WorkspaceTimeFilter,
): Promise<Map<string, number>> {
  const { runs, now } = await runsBetween(q, f);
  const per = runningTime(runs, {
    now,
    ...(f.from && { from: f.from }),
    ...(f.to && { to: f.to }),
    ...(group !== "user" && { bucket: group }),
  });
  const out = new Map<string, number>();
  for (const e of per.values()) {
    const key = group === "user" ? e.ownerId : e.bucket;
    if (key === null) continue;
    out.set(key, (out.get(key) ?? 0) + e.ms);
  }
  return out;
}

/** The emails of users, for report rows that only have running time. */
export async function emailsOf(q: Queryable, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const r = await q.query<{ id: string; email: string }>(
    "SELECT id, email FROM users WHERE id = ANY($1::uuid[])",
    [ids],
  );
  return new Map(r.rows.map((x) => [x.id, x.email]));
}
