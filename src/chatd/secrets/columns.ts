// The columns that hold sealed secrets, and the start-up pass that keeps them sealed with the
// current key: a plaintext value (a database from before encryption) is sealed, one sealed
// with an old key (rotation) is sealed again with the current one. Each row is rewritten only
// if it still holds the value read, so replicas starting at once do not undo each other.

import type { Queryable } from "../db/index.ts";
import { isSealed, secretSlot, type SecretBox, SecretOpenError } from "./box.ts";

export interface SealedColumn {
  table: string;
  column: string;
  /** The column that names the row in the slot (its primary key). */
  key: string;
}

/** Every column that holds a sealed secret. A new secret column is added here. */
export const SEALED_COLUMNS: readonly SealedColumn[] = [
  { table: "model_configs", column: "api_key", key: "id" },
  { table: "workspaces", column: "agent_token", key: "id" },
  { table: "replica_secret", column: "secret", key: "singleton" },
];

/** The slots of the secrets the server keeps, by row. */
export const SLOTS = {
  modelApiKey: (id: string): string => secretSlot("model_configs.api_key", id),
  agentToken: (workspaceId: string): string => secretSlot("workspaces.agent_token", workspaceId),
  replicaSecret: (): string => secretSlot("replica_secret.secret", "true"),
} as const;

export interface SealReport {
  /** Plaintext values sealed. */
  sealed: number;
  /** Values sealed with an old key, sealed again with the current one. */
  resealed: number;
  /** Values that do not open with any key this server has (left as they are). */
  unopenable: { slot: string; keyId: string | undefined }[];
}

const IDENTIFIER_RE = /^[a-z_][a-z0-9_]*$/;

/** Seals every secret of `columns` that is not sealed with the box's current key. */
export async function sealAtRest(
  q: Queryable,
  box: SecretBox,
  columns: readonly SealedColumn[] = SEALED_COLUMNS,
): Promise<SealReport> {
  const report: SealReport = { sealed: 0, resealed: 0, unopenable: [] };
  for (const c of columns) {
    for (const name of [c.table, c.column, c.key]) {
      if (!IDENTIFIER_RE.test(name)) throw new Error(`Invalid sealed column name "${name}".`);
    }
    const r = await q.query<{ k: string; v: string }>(
      `SELECT ${c.key}::text AS k, ${c.column} AS v FROM ${c.table} WHERE ${c.column} IS NOT NULL`,
    );
    for (const row of r.rows) {
      if (box.isCurrent(row.v)) continue;
      const slot = secretSlot(`${c.table}.${c.column}`, row.k);
      let plaintext: string;
      try {
        plaintext = box.open(row.v, slot);
      } catch (err) {
        if (!(err instanceof SecretOpenError)) throw err;
        report.unopenable.push({ slot, keyId: err.keyId });
        continue;
      }
      const u = await q.query(
        `UPDATE ${c.table} SET ${c.column} = $1 WHERE ${c.key}::text = $2 AND ${c.column} = $3`,
        [box.seal(plaintext, slot), row.k, row.v],
      );
      if (u.affectedRows > 0) {
        if (isSealed(row.v)) report.resealed += 1;
        else report.sealed += 1;
      }
    }
  }
  return report;
}
