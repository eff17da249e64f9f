// The Terraform state a workspace's builds hand on: the next build starts from the state the
// last one saved (on success, and on failure when Terraform wrote one), so a failed or cut-off
// build never makes Terraform forget what it created. The state may hold the agent token (a
// template that puts it in a resource) and whatever else a template's resources return, so it
// is sealed with the server's SecretBox before it is stored, bound to its workspace's row, and
// re-sealed with the current key at start like every other secret (SEALED_COLUMNS).

import type { Queryable } from "../chatd/db/index.ts";
import { SLOTS, type SecretBox } from "../chatd/secrets/index.ts";

/** The workspace's last saved state, or undefined before its first build wrote one. */
export async function loadState(
  q: Queryable,
  secrets: SecretBox,
  workspaceId: string,
): Promise<string | undefined> {
  const r = await q.query<{ state: string }>(
    "SELECT state FROM workspace_states WHERE workspace_id = $1",
    [workspaceId],
  );
  const row = r.rows[0];
  // A row of a database from before sealing opens as it is (and is sealed at the next start).
  return row ? secrets.open(row.state, SLOTS.workspaceState(workspaceId)) : undefined;
}

export async function saveState(
  q: Queryable,
  secrets: SecretBox,
  workspaceId: string,
  buildId: string,
  state: string,
): Promise<void> {
  await q.query(
    `INSERT INTO workspace_states (workspace_id, state, build_id, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (workspace_id) DO UPDATE SET state = EXCLUDED.state, build_id = EXCLUDED.build_id,
       updated_at = now()`,
    [workspaceId, secrets.seal(state, SLOTS.workspaceState(workspaceId)), buildId],
  );
}
