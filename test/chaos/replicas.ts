// Server replicas on one Postgres (CHATD.md 4): `bin/tether server --postgres-url` processes
// that the campaign SIGKILLs and replaces. Each replica's worker ID comes from its start-up
// log, so the campaign can tell which chats a killed replica owned (a failover), and each
// expired task attempt is counted from its log.

import path from "node:path";
import { generateSecretKey } from "../../src/chatd/secrets/index.ts";
import { createScratchDatabase, type ScratchDatabase } from "../support/db.ts";
import { startTether, type TetherProcess } from "./procs.ts";

export interface ReplicaOptions {
  postgresUrl: string;
  modelBaseUrl: string;
  leaseMs: number;
  heartbeatMs: number;
  agentAnswerTimeoutMs: number;
  /** Where replica logs and data directories go. */
  workDir: string;
}

export interface Replica {
  index: number;
  url: string;
  workerId: string;
  taskTimeoutMs: number | undefined;
  process: TetherProcess;
}

export class Replicas {
  readonly #o: ReplicaOptions;
  readonly #live = new Map<number, Replica>();
  /** Every replica of the database seals its secrets with this one key (TETHER_SECRET_KEY). */
  readonly #secretKey = generateSecretKey();
  #next = 0;
  /** Task attempts that ran out of their time, over all replicas (from their logs). */
  attemptTimeouts = 0;

  constructor(o: ReplicaOptions) {
    this.#o = o;
  }

  get live(): Replica[] {
    return [...this.#live.values()];
  }

  /** Starts one replica; `taskTimeoutMs` expires its task attempts (undefined: the default). */
  async start(taskTimeoutMs?: number): Promise<Replica> {
    const index = this.#next++;
    let workerId = "";
    const args = [
      "server",
      "--listen",
      "127.0.0.1:0",
      "--postgres-url",
      this.#o.postgresUrl,
      "--data-dir",
      path.join(this.#o.workDir, `replica-${index}`),
      "--no-local-workspace",
      "--model",
      "openai-compatible:chaos-model",
      "--model-base-url",
      this.#o.modelBaseUrl,
      "--lease-ms",
      String(this.#o.leaseMs),
      "--heartbeat-ms",
      String(this.#o.heartbeatMs),
      "--agent-answer-timeout-ms",
      String(this.#o.agentAnswerTimeoutMs),
      ...(taskTimeoutMs !== undefined ? ["--task-timeout-ms", String(taskTimeoutMs)] : []),
    ];
    const proc = await startTether(args, {
      env: { TETHER_SECRET_KEY: this.#secretKey },
      logFile: path.join(this.#o.workDir, `replica-${index}.log`),
      onStderrLine: (line) => {
        if (line.includes('"worker started"')) {
          const m = /"workerId":"([0-9a-f-]+)"/.exec(line);
          if (m) workerId = m[1]!;
        }
        if (line.includes("AttemptTimeoutError")) this.attemptTimeouts += 1;
      },
    });
    // The worker line is logged before the listening line is printed, but on another pipe.
    const by = Date.now() + 10_000;
    while (workerId === "" && Date.now() < by) await new Promise((r) => setTimeout(r, 20));
    if (workerId === "") {
      await proc.kill("SIGKILL");
      throw new Error(`replica ${index} logged no worker ID`);
    }
    const replica: Replica = { index, url: proc.url, workerId, taskTimeoutMs, process: proc };
    this.#live.set(index, replica);
    void proc.exited.then(() => this.#live.delete(index));
    return replica;
  }

  /** SIGKILLs the replica's process group (a crash: no lease is released). */
  async kill(r: Replica): Promise<void> {
    this.#live.delete(r.index);
    await r.process.kill("SIGKILL");
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.live.map((r) => r.process.kill("SIGTERM")));
  }
}

/** A fresh database `chaos_<random>` on the server of `url`; drop() removes it. */
export function createCampaignDatabase(url: string): Promise<ScratchDatabase> {
  return createScratchDatabase(url, "chaos");
}
