// This replica's dial-out agents: the connections agents made to it (one HTTP/2 session each,
// session.ts), their rows in the registry (registry.ts), and the answer to "where is this
// workspace's agent now" for the transport (transport.ts). The registry is the truth: a session
// is used only while its row names it, so an agent that reconnected elsewhere, was replaced by
// a newer process or lost its token is never sent a request here (a notification, or at the
// latest the periodic check, closes the stale session). One rule keeps two agent processes
// with the same token from taking turns: an agent that started earlier than the one connected
// now is refused while that one is connected.

import { randomUUID } from "node:crypto";
import type http2 from "node:http2";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { AGENT_CONNECT_CODES, realClock, type Clock, type Timer } from "../../contract/index.ts";
import type { Database } from "../db/index.ts";
import { silentLogger } from "../observe.ts";
import { AGENT_CHANNEL } from "./registry.ts";
import { RelayClient } from "./relay.ts";
import { openAgentSession, refuseAgentUpgrade, type AgentSessionOptions } from "./session.ts";
import { DialoutTransport, type AgentRoute, type AgentRouter } from "./transport.ts";

/** A request waiting for an agent looks in the registry again at least this often. */
export const AGENT_ROUTE_POLL_MS = 250;
/** Each local session is checked against the registry this often (a missed notification). */
export const AGENT_RECONCILE_INTERVAL_MS = 5_000;
/** Agents that started this close together count as the same age (the newest connection wins). */
export const AGENT_SUPERSEDE_TOLERANCE_MS = 1_000;

export interface AgentHubOptions {
  db: Database;
  /** This replica's worker ID (its `workers` row must exist before `start`). */
  workerId: string;
  /** The replica secret, for relaying to the replica that holds an agent. */
  secret: string;
  clock?: Clock;
  log?: Logger;
  /** AGENT_ROUTE_POLL_MS by default. */
  routePollMs?: number;
  /** AGENT_RECONCILE_INTERVAL_MS by default. */
  reconcileMs?: number;
  /** Pings of each session. */
  session?: AgentSessionOptions;
}

/** One agent's handshake, authenticated by its token. */
export interface AgentHandshake {
  workspaceId: string;
  tokenId: string;
  /** The uptime the agent reported (ms). */
  uptimeMs: number;
  /** The agent process's ID (the same on its reconnects). */
  instance: string;
}

export type AcceptOutcome =
  | { status: "accepted"; connectionId: string }
  | { status: "refused"; httpStatus: number; code: string; message: string };

interface Held {
  session: http2.ClientHttp2Session;
  connectionId: string;
}

export class AgentHub implements AgentRouter {
  readonly #o: AgentHubOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #relay: RelayClient;
  readonly #held = new Map<string, Held>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #transports = new Map<string, DialoutTransport>();
  /** Deletions of rows of sessions that closed, awaited by close(). */
  readonly #pending = new Set<Promise<unknown>>();
  #unlisten: (() => Promise<void>) | undefined;
  #timer: Timer | undefined;
  #accepting = false;

  constructor(o: AgentHubOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.#log = o.log ?? silentLogger();
    this.#relay = new RelayClient({ secret: o.secret, clock: this.#clock });
  }

  get workerId(): string {
    return this.#o.workerId;
  }

  /** Starts accepting agents (after the replica registered) and following the registry. */
  async start(): Promise<void> {
    this.#unlisten = await this.#o.db.listen(AGENT_CHANNEL, (ws) => this.#onNotify(ws));
    const every = this.#o.reconcileMs ?? AGENT_RECONCILE_INTERVAL_MS;
    const tick = () => {
      this.#timer = this.#clock.setTimer(every, () => {
        void this.#reconcileAll().finally(() => this.#accepting && tick());
      });
    };
    this.#accepting = true;
    tick();
  }

  /**
   * Closes every agent connection (the agents dial again, and reach another replica) and
   * deletes their rows. Requests in flight on them fail as `exchange` (sent again elsewhere).
   */
  async close(): Promise<void> {
    this.#accepting = false;
    this.#timer?.cancel();
    await this.#unlisten?.().catch(() => undefined);
    const closed = [...this.#held.values()].map(
      (h) =>
        new Promise((resolve) =>
          h.session.closed ? resolve(undefined) : h.session.once("close", resolve),
        ),
    );
    for (const h of this.#held.values()) h.session.destroy();
    await Promise.all(closed);
    await Promise.all([...this.#pending]);
    this.#relay.close();
  }

  /** The client transport of a workspace's dial-out agent (one per workspace, kept). */
  transport(workspaceId: string): DialoutTransport {
    let t = this.#transports.get(workspaceId);
    if (!t) {
      t = new DialoutTransport({
        workspaceId,
        router: this,
        relay: this.#relay,
        clock: this.#clock,
      });
      this.#transports.set(workspaceId, t);
    }
    return t;
  }

  /** The session this replica holds for the workspace, if it is open. */
  localSession(workspaceId: string): http2.ClientHttp2Session | undefined {
    const h = this.#held.get(workspaceId);
    return h && !h.session.closed && !h.session.destroyed ? h.session : undefined;
  }

  /**
   * Takes an authenticated agent's upgraded socket: registers it (unless a newer agent of the
   * workspace is connected, or the token was revoked meanwhile), answers 101 and holds the
   * session; otherwise answers the refusal. The socket is always answered.
   */
  async accept(socket: Duplex, head: Buffer, a: AgentHandshake): Promise<AcceptOutcome> {
    const refuse = (httpStatus: number, code: string, message: string): AcceptOutcome => {
      refuseAgentUpgrade(socket, httpStatus, code, message);
      return { status: "refused", httpStatus, code, message };
    };
    if (!this.#accepting)
      return refuse(
        503,
        AGENT_CONNECT_CODES.unavailable,
        "The server is not accepting agents now; dial again.",
      );
    const connectionId = randomUUID();
    let verdict: AcceptOutcome;
    try {
      verdict = await this.#o.db.transaction(async (tx) => {
        // The token row is locked against a concurrent revocation: that one either waits for
        // this row (and then deletes it) or came first (and this agent is refused).
        const t = await tx.query<{ revoked: boolean }>(
          "SELECT revoked_at IS NOT NULL AS revoked FROM workspace_agent_tokens WHERE id = $1 FOR SHARE",
          [a.tokenId],
        );
        if (!t.rows[0] || t.rows[0].revoked)
          return refusal(
            401,
            AGENT_CONNECT_CODES.unauthorized,
            "The agent token is unknown or revoked.",
          );
        const cur = await tx.query<{
          instance: string;
          older_by_ms: number;
          holder_alive: boolean;
        }>(
          `SELECT c.agent_instance AS instance, w.id IS NOT NULL AS holder_alive,
             (extract(epoch FROM (c.agent_started_at
               - (now() - make_interval(secs => $2::float8 / 1000)))) * 1000)::float8 AS older_by_ms
           FROM agent_connections c LEFT JOIN workers w ON w.id = c.worker_id
           WHERE c.workspace_id = $1 FOR UPDATE OF c`,
          [a.workspaceId, a.uptimeMs],
        );
        const c = cur.rows[0];
        if (
          c &&
          c.holder_alive &&
          c.instance !== a.instance &&
          c.older_by_ms > AGENT_SUPERSEDE_TOLERANCE_MS
        ) {
          return refusal(
            409,
            AGENT_CONNECT_CODES.superseded,
            "A newer agent process is connected for this workspace; this one started earlier.",
          );
        }
        await tx.query(
          `INSERT INTO agent_connections
             (workspace_id, worker_id, connection_id, token_id, agent_instance, agent_started_at)
           VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6::float8 / 1000))
           ON CONFLICT (workspace_id) DO UPDATE SET worker_id = EXCLUDED.worker_id,
             connection_id = EXCLUDED.connection_id, token_id = EXCLUDED.token_id,
             agent_instance = EXCLUDED.agent_instance,
             agent_started_at = EXCLUDED.agent_started_at, connected_at = now()`,
          [a.workspaceId, this.#o.workerId, connectionId, a.tokenId, a.instance, a.uptimeMs],
        );
        await tx.query("SELECT pg_notify($1, $2)", [AGENT_CHANNEL, a.workspaceId]);
        return { status: "accepted", connectionId } as const;
      });
    } catch (err) {
      this.#log.warn({ err, workspace_id: a.workspaceId }, "agent connection not registered");
      return refuse(
        503,
        AGENT_CONNECT_CODES.unavailable,
        "The server could not register the agent; dial again.",
      );
    }
    if (verdict.status === "refused") {
      this.#log.info(
        { workspace_id: a.workspaceId, status: verdict.httpStatus, code: verdict.code },
        "agent connection refused",
      );
      return refuse(verdict.httpStatus, verdict.code, verdict.message);
    }
    if (socket.destroyed || !this.#accepting) {
      // It went away while being registered: forget it again.
      this.#track(this.#forget(a.workspaceId, connectionId));
      socket.destroy();
      return verdict;
    }
    const session = openAgentSession(socket, head, { clock: this.#clock, ...this.#o.session });
    const old = this.#held.get(a.workspaceId);
    this.#held.set(a.workspaceId, { session, connectionId });
    old?.session.destroy();
    this.#log.info(
      { workspace_id: a.workspaceId, connection_id: connectionId, agent_uptime_ms: a.uptimeMs },
      "agent connected",
    );
    session.once("close", () => {
      if (this.#held.get(a.workspaceId)?.connectionId === connectionId)
        this.#held.delete(a.workspaceId);
      this.#log.info(
        { workspace_id: a.workspaceId, connection_id: connectionId },
        "agent disconnected",
      );
      this.#track(this.#forget(a.workspaceId, connectionId));
    });
    this.#wake(a.workspaceId);
    return verdict;
  }

  // ---- AgentRouter -------------------------------------------------------------------------

  async route(workspaceId: string): Promise<AgentRoute> {
    const r = await this.#o.db.query<{
      worker_id: string;
      connection_id: string;
      address: string | null;
    }>(
      `SELECT c.worker_id, c.connection_id, w.address FROM agent_connections c
       JOIN workers w ON w.id = c.worker_id WHERE c.workspace_id = $1`,
      [workspaceId],
    );
    const row = r.rows[0];
    if (!row) return { kind: "none" };
    if (row.worker_id === this.#o.workerId) {
      const h = this.#held.get(workspaceId);
      const session = this.localSession(workspaceId);
      return session && h?.connectionId === row.connection_id
        ? { kind: "local", session }
        : { kind: "none" };
    }
    return row.address
      ? { kind: "relay", workerId: row.worker_id, address: row.address }
      : { kind: "none" };
  }

  changed(workspaceId: string, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason as Error);
      let set = this.#waiters.get(workspaceId);
      if (!set) this.#waiters.set(workspaceId, (set = new Set()));
      const waiters = set;
      const done = () => {
        timer.cancel();
        signal.removeEventListener("abort", onAbort);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(workspaceId) === waiters)
          this.#waiters.delete(workspaceId);
      };
      const onAbort = () => {
        done();
        reject(signal.reason as Error);
      };
      const timer = this.#clock.setTimer(this.#o.routePollMs ?? AGENT_ROUTE_POLL_MS, () => {
        done();
        resolve();
      });
      signal.addEventListener("abort", onAbort, { once: true });
      waiters.add(() => {
        done();
        resolve();
      });
    });
  }

  // ---- inside ------------------------------------------------------------------------------

  #wake(workspaceId: string): void {
    for (const w of [...(this.#waiters.get(workspaceId) ?? [])]) w();
  }

  #onNotify(workspaceId: string): void {
    this.#wake(workspaceId);
    if (this.#held.has(workspaceId)) void this.#reconcile(workspaceId);
  }

  #track(p: Promise<unknown>): void {
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  /** Deletes the connection's row (only if it is still that connection's) and tells the others. */
  async #forget(workspaceId: string, connectionId: string): Promise<void> {
    try {
      const r = await this.#o.db.query(
        "DELETE FROM agent_connections WHERE workspace_id = $1 AND connection_id = $2",
        [workspaceId, connectionId],
      );
      if (r.affectedRows > 0) await this.#o.db.notify(AGENT_CHANNEL, workspaceId);
    } catch (err) {
      this.#log.warn({ err, workspace_id: workspaceId }, "agent connection row not deleted");
    }
  }

  /** Closes the local session of `workspaceId` when the registry no longer names it. */
  async #reconcile(workspaceId: string): Promise<void> {
    const h = this.#held.get(workspaceId);
    if (!h) return;
    try {
      const r = await this.#o.db.query<{ connection_id: string }>(
        "SELECT connection_id FROM agent_connections WHERE workspace_id = $1 AND worker_id = $2",
        [workspaceId, this.#o.workerId],
      );
      if (r.rows[0]?.connection_id === h.connectionId) return;
      if (this.#held.get(workspaceId) !== h) return; // replaced meanwhile
      this.#log.info(
        { workspace_id: workspaceId, connection_id: h.connectionId },
        "agent connection closed: the registry no longer names it (revoked, or connected elsewhere)",
      );
      h.session.destroy();
    } catch (err) {
      this.#log.warn({ err, workspace_id: workspaceId }, "agent connection check failed");
    }
  }

  async #reconcileAll(): Promise<void> {
    await Promise.all([...this.#held.keys()].map((ws) => this.#reconcile(ws)));
  }
}

function refusal(httpStatus: number, code: string, message: string): AcceptOutcome {
  return { status: "refused", httpStatus, code, message };
}
