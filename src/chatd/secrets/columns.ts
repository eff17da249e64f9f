// The columns that hold sealed secrets, and the start-up pass that keeps them sealed with the
// current key: a plaintext value (a database from before encryption) is sealed, one sealed
// with an old key (rotation) is sealed again with the current one. Each row is rewritten only
// if it still holds the value read, so replicas starting at once do not undo each other.

import type { Database, Queryable } from "../db/index.ts";
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
  { table: "workspace_states", column: "state", key: "workspace_id" },
];

/** The slots of the secrets the server keeps, by row. */
export const SLOTS = {
  modelApiKey: (id: string): string => secretSlot("model_configs.api_key", id),
  agentToken: (workspaceId: string): string => secretSlot("workspaces.agent_token", workspaceId),
  replicaSecret: (): string => secretSlot("replica_secret.secret", "true"),
  /** A template workspace's Terraform state (it may hold its agent token and more). */
  workspaceState: (workspaceId: string): string =>
    secretSlot("workspace_states.state", workspaceId),
} as const;

export interface SealReport {
  /** Plaintext values sealed. */
  sealed: number;
  /** Values sealed with an old key, sealed again with the current one. */
  resealed: number;
  /** Values that do not open with any key this server has (left as they are). */
  unopenable: { slot: string; keyId: string | undefined }[];
  /** The tables with rows rewritten: their old row versions still hold the old values. */
  tables: string[];
}

const IDENTIFIER_RE = /^[a-z_][a-z0-9_]*$/;

/** Seals every secret of `columns` that is not sealed with the box's current key. */
export async function sealAtRest(
  q: Queryable,
  box: SecretBox,
  columns: readonly SealedColumn[] = SEALED_COLUMNS,
): Promise<SealReport> {
  const report: SealReport = { sealed: 0, resealed: 0, unopenable: [], tables: [] };
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
        if (!report.tables.includes(c.table)) report.tables.push(c.table);
      }
    }
  }
  return report;
}

/** WAL switches and checkpoints after which the embedded database holds no older WAL. */
const WAL_PURGE_ROUNDS = 3;

/**
 * Rewrites `tables` (VACUUM FULL), so the row versions an UPDATE left behind — the plaintext
 * sealAtRest replaced — are gone from their files, not just from the live rows; on the
 * embedded database it also moves past the WAL segments that recorded them, so they are
 * removed. (A Postgres server's WAL, archives and backups are its operator's: rotate secrets
 * that were stored in plaintext.) Outside any transaction; a short exclusive lock per table,
 * taken only when something was sealed.
 */
export async function purgeOldRowVersions(db: Database, tables: readonly string[]): Promise<void> {
  for (const t of tables) {
    if (!SEALED_COLUMNS.some((c) => c.table === t)) throw new Error(`${t} holds no secret.`);
    await db.exec(`VACUUM FULL ${t}`);
  }
  if (db.kind !== "pglite" || tables.length === 0) return;
  for (let i = 0; i < WAL_PURGE_ROUNDS; i++) {
    await db.query("SELECT pg_switch_wal()");
    await db.exec("CHECKPOINT");
  }
}
