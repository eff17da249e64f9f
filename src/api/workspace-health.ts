// Workspace health: an agent's answer to `GET /api/v0/info`, cached per API instance so a dead
// agent costs one bounded check per TTL instead of one per read. A fresh answer is given at once;
// a stale one is given at once too while a single refresh runs in the background (concurrent
// reads share it). Only a workspace never checked, or whose agent URL or token changed since,
// waits for its check (bounded by the timeout). `checked_at` is always when the answered check ran.
// A check connects under the same address policy as the AgentPool (a member's URL: public
// addresses only), and says only reachable or not: never why (no socket error is answered).

import { agentAddressPolicy, type UrlCheckedAs } from "../chatd/agents.ts";
import { AgentClient, type AddressPolicy, type Clock } from "../contract/index.ts";
import type { WorkspaceHealth } from "./views.ts";

export const DEFAULT_HEALTH_TIMEOUT_MS = 2_000;
export const DEFAULT_HEALTH_TTL_MS = 10_000;
/** An entry nobody read for this long is dropped: its workspace is gone or unwatched. */
const HEALTH_ENTRY_IDLE_MS = 10 * 60_000;
/** At most this many workspaces' health is kept; the least recently read are dropped first. */
const MAX_HEALTH_ENTRIES = 10_000;

/** The agent's health: reachable with its version and uptime, or not (any failure). */
async function checkHealth(
  agentUrl: string,
  agentToken: string | null,
  allowAddress: AddressPolicy | undefined,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<WorkspaceHealth> {
  let client: AgentClient | undefined;
  try {
    // Inside the try: a URL the client cannot speak to is an unreachable agent, not a 500.
    client = new AgentClient({
      baseUrl: agentUrl,
      ...(agentToken !== null && { token: agentToken }),
      ...(allowAddress && { allowAddress }),
    });
    const info = await client.info({ timeoutMs, signal });
    const started = Date.parse(info.started_at);
    return {
      reachable: true,
      version: info.version,
      ...(Number.isFinite(started) && { uptime_ms: Math.max(0, Date.now() - started) }),
      checked_at: new Date().toISOString(),
    };
  } catch {
    return { reachable: false, checked_at: new Date().toISOString() };
  } finally {
    client?.close();
  }
}

/** One workspace's health, valid only for the agent URL, token and policy it was checked with. */
interface Entry {
  agentUrl: string;
  agentToken: string | null;
  checkedAs: UrlCheckedAs;
  /** The last finished check, and when it finished on the cache's clock. */
  health?: WorkspaceHealth;
  checkedMs: number;
  /** The check in flight, if any: every read that needs one shares it. */
  checking?: Promise<WorkspaceHealth>;
  readMs: number;
}

export interface HealthCacheOptions {
  /** Bound on one check. */
  timeoutMs: number;
  /** How long an answer is fresh: younger ones are answered without a check. */
  ttlMs: number;
  /** Ages answers (tests move it). */
  clock: Clock;
  /** The addresses a member's agent URL may reach (the AgentPool's); public ones by default. */
  memberAgentAddresses?: AddressPolicy;
}

export class WorkspaceHealthCache {
  /** By workspace ID, least recently read first (a read moves its entry to the end). */
  readonly #entries = new Map<string, Entry>();
  /** Aborts the checks in flight when the API closes. */
  readonly #closing = new AbortController();

  constructor(private readonly o: HealthCacheOptions) {}

  /** The health of the workspace `row` (its `id`, `agent_url` and `agent_token`). */
  async health(row: Record<string, unknown>): Promise<WorkspaceHealth> {
    const id = row.id as string;
    const agentUrl = row.agent_url as string;
    const agentToken = (row.agent_token as string | null) ?? null;
    const checkedAs = (row.url_checked_as as UrlCheckedAs | undefined) ?? null;
    const now = this.o.clock.now();
    let e = this.#entries.get(id);
    this.#entries.delete(id);
    // A new agent URL or token (another replica's PATCH tells us nothing) voids the old health.
    if (!e || e.agentUrl !== agentUrl || e.agentToken !== agentToken || e.checkedAs !== checkedAs) {
      e = { agentUrl, agentToken, checkedAs, checkedMs: now, readMs: now };
    }
    e.readMs = now;
    this.#entries.set(id, e);
    this.#dropIdle(now);

    if (e.health && now - e.checkedMs < this.o.ttlMs) return e.health;
    const checking = e.checking ?? this.#check(e);
    // Stale: answered as it is while the refresh runs. Never checked: wait for the check.
    return e.health ?? checking;
  }

  /** Forgets a workspace's health, so its next read checks again (after a change). */
  forget(id: string): void {
    this.#entries.delete(id);
  }

  /** Aborts the checks in flight; a check started after this answers unreachable at once. */
  close(): void {
    this.#closing.abort();
    this.#entries.clear();
  }

  #check(e: Entry): Promise<WorkspaceHealth> {
    const policy = agentAddressPolicy(e.checkedAs, this.o.memberAgentAddresses);
    const checking = checkHealth(
      e.agentUrl,
      e.agentToken,
      policy,
      this.o.timeoutMs,
      this.#closing.signal,
    )
      // checkHealth never rejects: every failure is an unreachable agent.
      .then((health) => {
        e.health = health;
        e.checkedMs = this.o.clock.now();
        return health;
      })
      .finally(() => {
        e.checking = undefined;
      });
    e.checking = checking;
    return checking;
  }

  /** Drops entries read too long ago, and the least recently read beyond the cap. */
  #dropIdle(now: number): void {
    for (const [id, e] of this.#entries) {
      if (this.#entries.size <= MAX_HEALTH_ENTRIES && now - e.readMs < HEALTH_ENTRY_IDLE_MS) break;
      this.#entries.delete(id);
    }
  }
}
