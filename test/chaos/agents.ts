// Real workspace agents (`bin/tether agent`), one directory each. Restarting an agent kills
// it and starts a new one on the same directory: its records are gone (CONTRACT.md A7), so
// calls made before the restart can only be answered "unknown" from then on.

import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { startTether, type TetherProcess } from "./procs.ts";

export class WorkspaceAgent {
  readonly token = randomBytes(16).toString("hex");
  #proc: TetherProcess | undefined;
  /** Instants (ms since the epoch) at which a running agent was killed. */
  readonly restarts: number[] = [];
  /** When the current agent process started listening. */
  startedAt = 0;

  private constructor(
    readonly dir: string,
    readonly name: string,
  ) {}

  static async start(dir: string, name: string): Promise<WorkspaceAgent> {
    await mkdir(dir, { recursive: true });
    const a = new WorkspaceAgent(dir, name);
    await a.#spawn();
    return a;
  }

  /** The current agent's base URL (changes on every restart). */
  get url(): string {
    return this.#proc?.url ?? "";
  }

  async #spawn(): Promise<void> {
    this.#proc = await startTether(
      ["agent", "--listen", "127.0.0.1:0", "--dir", this.dir, "--token", this.token],
      { logFile: path.join(path.dirname(this.dir), `${this.name}.log`) },
    );
    this.startedAt = Date.now();
  }

  /** Kills the agent (SIGKILL of its group: a crash; SIGTERM: it stops its processes) and starts a new one. */
  async restart(signal: "SIGKILL" | "SIGTERM"): Promise<void> {
    const old = this.#proc;
    this.#proc = undefined;
    this.restarts.push(Date.now());
    await old?.kill(signal);
    await this.#spawn();
  }

  async stop(): Promise<void> {
    await this.#proc?.kill("SIGTERM");
    this.#proc = undefined;
  }
}
