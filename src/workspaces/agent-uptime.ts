// STAND-IN until the dialout branch merges: how long a connected agent has been up, in ms.
// The dialout branch reports it with the agent's connection; this reads the agent's info over
// the pool and compares its start with this machine's clock, which is only right when the
// agent runs on the server's machine (the local and docker templates). Replace the body with
// the dialout branch's uptime at the merge; keep the signature.

import type { AgentPool } from "../chatd/agents.ts";

/** Bound on the info request. */
const INFO_TIMEOUT_MS = 2_000;

/** The agent's uptime, or undefined when it cannot be learnt now. */
export async function agentUptimeMs(
  agents: AgentPool,
  workspaceId: string,
  signal: AbortSignal,
): Promise<number | undefined> {
  try {
    const client = await agents.forWorkspace(workspaceId);
    if (!client) return undefined;
    const info = await client.info({ signal, timeoutMs: INFO_TIMEOUT_MS });
    const started = Date.parse(info.started_at);
    return Number.isFinite(started) ? Math.max(0, Date.now() - started) : undefined;
  } catch {
    return undefined;
  }
}
