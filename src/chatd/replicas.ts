// The replica registry (CHATD.md 4): each server process keeps a row in `workers` — its
// worker ID and the internal address other replicas reach it at — renewed with its lease
// heartbeat and deleted on a graceful stop. A replica that died stops renewing; its row is
// swept once it is older than a lease, when its chats are taken over anyway. The replica
// secret guards the internal routes between replicas; the first replica makes it, and it is
// stored sealed like every secret (src/chatd/secrets).

import { randomBytes } from "node:crypto";
import type { Queryable } from "./db/index.ts";
import { SLOTS, type SecretBox } from "./secrets/index.ts";

const SECRET_BYTES = 32;

/** The header replicas show the secret in on each other's internal routes. */
export const REPLICA_SECRET_HEADER = "x-tether-replica-secret";

/** Registers the replica, or renews its row (re-creating it if it was swept). */
export async function registerReplica(
  q: Queryable,
  workerId: string,
  address: string | null,
): Promise<void> {
  await q.query(
    `INSERT INTO workers (id, address, heartbeat_at) VALUES ($1, $2, now())
     ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, heartbeat_at = now()`,
    [workerId, address],
  );
}

/** Deletes the rows of replicas whose heartbeat is older than `staleMs` (they died). */
export async function sweepReplicas(q: Queryable, staleMs: number): Promise<void> {
  await q.query(
    "DELETE FROM workers WHERE heartbeat_at < now() - make_interval(secs => $1::float8 / 1000)",
    [staleMs],
  );
}

export async function deregisterReplica(q: Queryable, workerId: string): Promise<void> {
  await q.query("DELETE FROM workers WHERE id = $1", [workerId]);
}

/** Where replica `workerId` is reached, or undefined when it is not registered (or has none). */
export async function replicaAddress(q: Queryable, workerId: string): Promise<string | undefined> {
  const r = await q.query<{ address: string | null }>("SELECT address FROM workers WHERE id = $1", [
    workerId,
  ]);
  return r.rows[0]?.address ?? undefined;
}

/** The replicas' shared secret: made by the first replica that asks, the same for all after. */
export async function replicaSecret(q: Queryable, secrets: SecretBox): Promise<string> {
  await q.query(
    "INSERT INTO replica_secret (singleton, secret) VALUES (true, $1) ON CONFLICT (singleton) DO NOTHING",
    [secrets.seal(randomBytes(SECRET_BYTES).toString("base64url"), SLOTS.replicaSecret())],
  );
  const r = await q.query<{ secret: string }>("SELECT secret FROM replica_secret");
  return secrets.open(r.rows[0]!.secret, SLOTS.replicaSecret());
}
