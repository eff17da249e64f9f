// How long a workspace's dial-out agent process has been up, in ms, from the registry of agent
// connections (src/chatd/dialout): the uptime the agent reported when it connected plus the
// time since on the database clock, never overstated. Only durations cross the wire.

import type { AgentPool } from "../chatd/agents.ts";

/** The agent's uptime, or undefined when it is not connected now. */
export async function agentUptimeMs(
  agents: AgentPool,
  workspaceId: string,
  signal: AbortSignal,
): Promise<number | undefined> {
  signal.throwIfAborted();
  const s = await agents.agentStatus(workspaceId);
  return s.connected ? s.uptimeMs : undefined;
}
