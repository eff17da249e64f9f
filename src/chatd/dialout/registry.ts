// The registry of dial-out agents (table `agent_connections`): which replica holds which
// workspace's agent connection, and how long that agent process has been up. A row is written
// when an agent connects and deleted when that connection ends, when its token is revoked, or
// with its replica's `workers` row; a row whose replica is no longer registered is not a
// connection. Uptime is kept as `now() − reported uptime` on the database clock, so it is read
// back as a duration on the same clock (no two clocks are ever compared).

import type { Queryable } from "../db/index.ts";

/** Notified with a workspace ID whenever its agent connects, disconnects or is revoked. */
export const AGENT_CHANNEL = "tether_agents";

/** A workspace's agent as the registry knows it. */
export interface AgentConnectionInfo {
  /** The replica holding the connection. */
  workerId: string;
  /** Where other replicas reach that replica (null: it registered no address). */
  address: string | null;
  connectionId: string;
  /** How long the agent process has been up now (its record store's age), in ms. */
  uptimeMs: number;
  connectedAt: Date;
}

type ConnectionRow = {
  workspace_id: string;
  worker_id: string;
  address: string | null;
  connection_id: string;
  uptime_ms: number;
  connected_at: Date;
};

const SELECT = `SELECT c.workspace_id, c.worker_id, w.address, c.connection_id, c.connected_at,
    (extract(epoch FROM (now() - c.agent_started_at)) * 1000)::float8 AS uptime_ms
  FROM agent_connections c JOIN workers w ON w.id = c.worker_id`;

function info(r: ConnectionRow): AgentConnectionInfo {
  return {
    workerId: r.worker_id,
    address: r.address,
    connectionId: r.connection_id,
    uptimeMs: Math.max(0, Math.floor(r.uptime_ms)),
    connectedAt: r.connected_at,
  };
}

/** The workspace's agent connection, or undefined when no registered replica holds one. */
export async function agentConnection(
  q: Queryable,
  workspaceId: string,
): Promise<AgentConnectionInfo | undefined> {
  const r = await q.query<ConnectionRow>(`${SELECT} WHERE c.workspace_id = $1`, [workspaceId]);
  return r.rows[0] && info(r.rows[0]);
}

/** The connections of several workspaces at once (a list view); absent IDs are not connected. */
export async function agentConnections(
  q: Queryable,
  workspaceIds: readonly string[],
): Promise<Map<string, AgentConnectionInfo>> {
  const out = new Map<string, AgentConnectionInfo>();
  if (workspaceIds.length === 0) return out;
  const r = await q.query<ConnectionRow>(`${SELECT} WHERE c.workspace_id = ANY($1::uuid[])`, [
    workspaceIds,
  ]);
  for (const row of r.rows) out.set(row.workspace_id, info(row));
  return out;
}

/**
 * Forgets the workspace's connection wherever it is held, and tells its holder (which then
 * closes it). Used when the workspace's agent tokens are revoked; safe inside a transaction
 * (the notification goes out on commit).
 */
export async function dropAgentConnection(q: Queryable, workspaceId: string): Promise<void> {
  await q.query("DELETE FROM agent_connections WHERE workspace_id = $1", [workspaceId]);
  await q.query("SELECT pg_notify($1, $2)", [AGENT_CHANNEL, workspaceId]);
}
