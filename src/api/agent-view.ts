// A workspace's `agent: {connected}` and `health`: for a workspace whose agent dials out, both
// come from the registry of agent connections (connected to a live replica, and the agent
// process's uptime there); for a registered agent URL, from the health check of that URL
// (workspace-health.ts), `connected` meaning it answered.

import { agentConnection } from "../chatd/dialout/index.ts";
import type { Queryable } from "../chatd/db/index.ts";
import type { WorkspaceHealth } from "./views.ts";

export interface AgentFields {
  agent: { connected: boolean };
  health: WorkspaceHealth;
}

export async function agentFields(
  db: Queryable,
  row: Record<string, unknown>,
  urlHealth: (row: Record<string, unknown>) => Promise<WorkspaceHealth>,
): Promise<AgentFields> {
  if (row.agent_url !== null) {
    const health = await urlHealth(row);
    return { agent: { connected: health.reachable }, health };
  }
  const c = await agentConnection(db, row.id as string);
  const checked_at = new Date().toISOString();
  return c
    ? { agent: { connected: true }, health: { reachable: true, uptime_ms: c.uptimeMs, checked_at } }
    : { agent: { connected: false }, health: { reachable: false, checked_at } };
}
