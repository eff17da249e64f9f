// The agent client's transport to a dial-out agent (AgentTransport of src/contract): each
// request finds the agent where it is connected now — on this replica's own session, or
// through the replica that holds it (relay.ts) — and, while it is connected nowhere, waits for
// it to connect, up to the request's own bound. That wait is the contract's reachability wait
// (CONTRACT.md 9, "connect first, then compute the age"): the tool call headers are stamped
// only as the request goes out, with the age grown by all the time spent finding the agent.
// A request that may have reached the agent and lost its answer is an `exchange` failure, which
// the tools send again with the same headers (the agent replays its record, never a second run).

import type http2 from "node:http2";
import {
  AgentConnectionError,
  AgentTimeoutError,
  MAX_AGENT_ANSWER_BYTES,
  realClock,
  type AgentAnswer,
  type AgentRequest,
  type AgentTransport,
  type Clock,
} from "../../contract/index.ts";
import { readAnswer, requestOnSession } from "./session.ts";

/** Where a workspace's agent is reached right now. */
export type AgentRoute =
  | { kind: "local"; session: http2.ClientHttp2Session }
  | { kind: "relay"; workerId: string; address: string }
  | { kind: "none" };

/** Finds agents: this replica's hub (hub.ts), or a stand-in with one session in tests. */
export interface AgentRouter {
  route(workspaceId: string): Promise<AgentRoute>;
  /**
   * Resolves at the next hint that the workspace's route may have changed (its agent connected
   * here, a notification) or after a short poll interval; rejects with the signal's reason.
   */
  changed(workspaceId: string, signal: AbortSignal): Promise<void>;
}

/** Relays one request to the replica holding the agent (relay.ts). */
export interface AgentRelay {
  /**
   * `moved`: nothing was sent — the holder does not hold the agent (any more), cannot be
   * reached, or the signal aborted first; look again. Otherwise the agent's answer, or an error
   * like a session's (the signal's reason once the request went out).
   */
  exchange(
    route: { workerId: string; address: string },
    workspaceId: string,
    req: AgentRequest,
    began: number,
    signal: AbortSignal,
  ): Promise<{ kind: "answer"; answer: AgentAnswer } | { kind: "moved" }>;
}

export interface DialoutTransportOptions {
  workspaceId: string;
  router: AgentRouter;
  /** For agents held by another replica; without it they count as not connected. */
  relay?: AgentRelay;
  clock?: Clock;
  maxAnswerBytes?: number;
}

export class DialoutTransport implements AgentTransport {
  readonly #o: DialoutTransportOptions;
  readonly #clock: Clock;

  constructor(o: DialoutTransportOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
  }

  /** Sessions belong to the hub and the relay's pool to the hub too: nothing to close here. */
  close(): void {}

  async exchange(req: AgentRequest, signal: AbortSignal): Promise<AgentAnswer> {
    const began = this.#clock.now();
    const ws = this.#o.workspaceId;
    for (;;) {
      if (signal.aborted) throw this.#notReached(signal, began);
      let route: AgentRoute;
      try {
        route = await this.#o.router.route(ws);
      } catch {
        route = { kind: "none" }; // the registry could not be read: wait and look again
      }
      switch (route.kind) {
        case "local": {
          const headers = { ...req.headers, ...req.stamp?.(this.#clock.now() - began) };
          try {
            const head = await requestOnSession(
              route.session,
              { method: req.method, path: req.path, headers, ...(req.body && { body: req.body }) },
              signal,
            );
            return await readAnswer(head, signal, this.#o.maxAnswerBytes ?? MAX_AGENT_ANSWER_BYTES);
          } catch (err) {
            // The session closed just before the request went out: nothing was sent.
            if (err instanceof AgentConnectionError && err.phase === "connect" && !signal.aborted)
              break;
            throw err;
          }
        }
        case "relay": {
          if (!this.#o.relay) break;
          const r = await this.#o.relay.exchange(route, ws, req, began, signal);
          if (r.kind === "answer") return r.answer;
          break;
        }
        case "none":
          break;
        default:
          route satisfies never;
      }
      await this.#o.router.changed(ws, signal).catch(() => undefined);
    }
  }

  /**
   * Nothing was sent and the wait ended: the request's own bound ran out (the agent is not
   * connected: unreachable, the call never reached it), or the caller stopped waiting.
   */
  #notReached(signal: AbortSignal, began: number): unknown {
    if (signal.reason instanceof AgentTimeoutError) {
      return new AgentConnectionError(
        `The workspace agent is not connected: it did not connect within ${Math.round(this.#clock.now() - began)} ms.`,
        "connect",
      );
    }
    return signal.reason;
  }
}
