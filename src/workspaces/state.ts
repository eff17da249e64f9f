// The Terraform state a workspace's builds hand on: the next build starts from the state the
// last one saved (on success, and on failure when Terraform wrote one), so a failed or cut-off
// build never makes Terraform forget what it created. The state may hold the agent token
// (a template that puts it in a resource), so it is sealed before it is stored.

import type { Queryable } from "../chatd/db/index.ts";

// TODO(secrets): seal with the secrets module's AES-GCM (the secrets branch adds it, with
// TETHER_SECRET_KEY) once it is merged: `seal = (s) => encryptSecret(s)`, `open` the inverse,
// reading unsealed rows of older databases as they are. Until then the state is stored as is.
function seal(state: string): string {
  return state;
}

function open(stored: string): string {
  return stored;
}

/** The workspace's last saved state, or undefined before its first build wrote one. */
export async function loadState(q: Queryable, workspaceId: string): Promise<string | undefined> {
  const r = await q.query<{ state: string }>(
    "SELECT state FROM workspace_states WHERE workspace_id = $1",
    [workspaceId],
  );
  const row = r.rows[0];
  return row ? open(row.state) : undefined;
}

export async function saveState(
  q: Queryable,
  workspaceId: string,
  buildId: string,
  state: string,
): Promise<void> {
  await q.query(
    `INSERT INTO workspace_states (workspace_id, state, build_id, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (workspace_id) DO UPDATE SET state = EXCLUDED.state, build_id = EXCLUDED.build_id,
       updated_at = now()`,
    [workspaceId, seal(state), buildId],
  );
}
