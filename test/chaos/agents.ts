// Real workspace agents (`bin/tether agent`), one directory each: listening ones, which the
// servers reach through a fault proxy, and dial-out ones (`--server`), which reach the replicas
// through a TCP front that can cut or freeze their connection. Restarting an agent kills it and
// starts a new one on the same directory: its records are gone (CONTRACT.md A7), so calls made
// before the restart can only be answered "unknown" from then on.

import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { CONNECTED_RE, startTether, type TetherProcess } from "./procs.ts";

/** How a dial-out agent reaches the servers: the front's URL and its agent token. */
export interface DialoutVia {
  url: string;
  token: string;
}

export class WorkspaceAgent {
  /** A listening agent's own token (a dial-out agent's is minted by the server's database). */
  readonly token: string;
  #proc: TetherProcess | undefined;
  /** Instants (ms since the epoch) at which a running agent was killed. */
  readonly restarts: number[] = [];
  /** When the current agent process started listening (dial-out: first connected). */
  startedAt = 0;
  /** Connections the agent processes made so far (dial-out), over all restarts. */
  #connectsBefore = 0;

  private constructor(
    readonly dir: string,
    readonly name: string,
    readonly dialout: DialoutVia | undefined,
  ) {
    this.token = dialout?.token ?? randomBytes(16).toString("hex");
  }

  static async start(dir: string, name: string, dialout?: DialoutVia): Promise<WorkspaceAgent> {
    await mkdir(dir, { recursive: true });
    const a = new WorkspaceAgent(dir, name, dialout);
    await a.#spawn();
    return a;
  }

  /** The current agent's base URL (changes on every restart); "" for a dial-out agent. */
  get url(): string {
    return this.dialout ? "" : (this.#proc?.url ?? "");
  }

  /** How many times a dial-out agent connected to a server, over all its processes. */
  get connects(): number {
    const now = this.#proc?.stdout().match(new RegExp(CONNECTED_RE.source, "gm"))?.length ?? 0;
    return this.#connectsBefore + now;
  }

  async #spawn(): Promise<void> {
    const logFile = path.join(path.dirname(this.dir), `${this.name}.log`);
    this.#proc = this.dialout
      ? await startTether(
          [
            "agent",
            "--server",
            this.dialout.url,
            "--dir",
            this.dir,
            "--reconnect-min-ms",
            "50",
            "--reconnect-max-ms",
            "500",
          ],
          { logFile, env: { TETHER_AGENT_TOKEN: this.dialout.token }, ready: CONNECTED_RE },
        )
      : await startTether(
          ["agent", "--listen", "127.0.0.1:0", "--dir", this.dir, "--token", this.token],
          { logFile },
        );
    this.startedAt = Date.now();
  }

  /** Kills the agent (SIGKILL of its group: a crash; SIGTERM: it stops its processes) and starts a new one. */
  async restart(signal: "SIGKILL" | "SIGTERM"): Promise<void> {
    const old = this.#proc;
    this.#connectsBefore = this.connects;
    this.#proc = undefined;
    this.restarts.push(Date.now());
    await old?.kill(signal);
    await this.#spawn();
  }

  async stop(): Promise<void> {
    this.#connectsBefore = this.connects;
    await this.#proc?.kill("SIGTERM");
    this.#proc = undefined;
  }
}
