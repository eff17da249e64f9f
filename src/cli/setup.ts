// Start-up rows the server keeps true: the default model config (from --model, or a
// default when none is configured yet) and the local workspace (its agent's address, its
// sealed token, and its owner: the first user, who gets it when created if none exists yet).

import { randomUUID } from "node:crypto";
import type { Database, Queryable } from "../chatd/db/index.ts";
import { SLOTS, type SecretBox } from "../chatd/secrets/index.ts";
import type { ModelSpec } from "../model/index.ts";

/**
 * Makes `spec` the default model when `force` (the operator passed --model), or when no
 * default exists yet; an existing row with the same provider, model and base URL is reused.
 */
export async function ensureDefaultModel(
  db: Database,
  spec: ModelSpec,
  baseUrl: string | undefined,
  force: boolean,
): Promise<void> {
  await db.transaction(async (tx) => {
    const current = await tx.query<{ id: string }>(
      "SELECT id FROM model_configs WHERE is_default LIMIT 1",
    );
    if (current.rows.length > 0 && !force) return;
    const same = await tx.query<{ id: string }>(
      "SELECT id FROM model_configs WHERE provider = $1 AND model = $2 AND base_url IS NOT DISTINCT FROM $3 ORDER BY created_at LIMIT 1",
      [spec.provider, spec.model, baseUrl ?? null],
    );
    // A restart with the --model that is already the default writes nothing (a write would
    // fire the config trigger, and a start pays ~0.1 s for the first trigger PGlite runs).
    if (same.rows[0] !== undefined && same.rows[0].id === current.rows[0]?.id) return;
    const id = same.rows[0]?.id ?? randomUUID();
    await tx.query("UPDATE model_configs SET is_default = false WHERE is_default AND id <> $1", [
      id,
    ]);
    if (same.rows[0]) {
      await tx.query("UPDATE model_configs SET is_default = true WHERE id = $1", [id]);
    } else {
      await tx.query(
        "INSERT INTO model_configs (id, provider, model, base_url, is_default) VALUES ($1, $2, $3, $4, true)",
        [id, spec.provider, spec.model, baseUrl ?? null],
      );
    }
  });
}

/**
 * The local workspace row (`local`, named "local"), pointing at the local agent, the default,
 * and owned by the owner (the first user): until one exists it has no owner and nobody may use
 * it, and the first user gets it when created (a trigger, migration 010).
 */
/** Whether an earlier start registered the local workspace. */
export async function hasLocalWorkspace(db: Queryable): Promise<boolean> {
  return (await db.query("SELECT 1 FROM workspaces WHERE local")).rows.length > 0;
}

export async function upsertLocalWorkspace(
  db: Database,
  url: string,
  token: string,
  secrets: SecretBox,
): Promise<void> {
  await db.transaction(async (tx) => {
    // Locked, so two replicas starting at once cannot both insert one.
    await tx.query("LOCK TABLE workspaces IN SHARE ROW EXCLUSIVE MODE");
    const found = await tx.query<{ id: string }>("SELECT id FROM workspaces WHERE local");
    const id = found.rows[0]?.id ?? randomUUID();
    const sealed = secrets.seal(token, SLOTS.agentToken(id));
    const owner = "(SELECT id FROM users WHERE role = 'owner' ORDER BY created_at, id LIMIT 1)";
    await tx.query("UPDATE workspaces SET is_default = false WHERE is_default AND id <> $1", [id]);
    if (found.rows[0]) {
      await tx.query(
        `UPDATE workspaces SET agent_url = $2, agent_token = $3, is_default = true,
           owner_id = coalesce(owner_id, ${owner}) WHERE id = $1`,
        [id, url, sealed],
      );
    } else {
      await tx.query(
        `INSERT INTO workspaces (id, owner_id, name, agent_url, agent_token, is_default, local)
         VALUES ($1, ${owner}, 'local', $2, $3, true, true)`,
        [id, url, sealed],
      );
    }
  });
}
