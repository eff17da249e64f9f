// Activity this replica sees and the database does not: a user's open chat stream on a
// template workspace. While a hold is open the workspace's last activity is written every
// flush interval (and once more when the last hold closes), so the lifecycle loop — on any
// replica — never finds it idle. The interval must be shorter than the shortest TTL in use.

import type { Logger } from "pino";
import type { Queryable } from "../chatd/db/index.ts";
import { realClock, type Clock, type Timer } from "../contract/index.ts";
import { touchWorkspaces } from "./workspace.ts";

/** How often held workspaces' activity is written. */
export const ACTIVITY_FLUSH_MS = 10_000;

export class WorkspaceActivity {
  readonly #q: Queryable;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  readonly #flushMs: number;
  /** Open holds per workspace. */
  readonly #holds = new Map<string, number>();
  /** Workspaces to write at the next flush though no hold is open any more. */
  readonly #released = new Set<string>();
  #timer: Timer | undefined;
  #stopped = false;

  constructor(q: Queryable, o: { clock?: Clock; flushMs?: number; log?: Logger } = {}) {
    this.#q = q;
    this.#clock = o.clock ?? realClock;
    this.#flushMs = o.flushMs ?? ACTIVITY_FLUSH_MS;
    this.#log = o.log;
  }

  /** Counts the workspace as active until the returned release is called (once). */
  hold(workspaceId: string): () => void {
    this.#holds.set(workspaceId, (this.#holds.get(workspaceId) ?? 0) + 1);
    this.#schedule();
    void this.flush([workspaceId]);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.#holds.get(workspaceId) ?? 1) - 1;
      if (n > 0) this.#holds.set(workspaceId, n);
      else {
        this.#holds.delete(workspaceId);
        this.#released.add(workspaceId);
        void this.flush();
      }
    };
  }

  /** Writes now for the held workspaces (and `also`). */
  async flush(also: string[] = []): Promise<void> {
    const ids = [...new Set([...this.#holds.keys(), ...this.#released, ...also])];
    this.#released.clear();
    try {
      await touchWorkspaces(this.#q, ids);
    } catch (err) {
      this.#log?.warn({ err }, "workspace activity write failed");
    }
  }

  #schedule(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = this.#clock.setTimer(this.#flushMs, () => {
      this.#timer = undefined;
      if (this.#holds.size === 0) return;
      void this.flush().finally(() => this.#schedule());
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }
}
