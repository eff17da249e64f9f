// The agent's table of processes (CONTRACT.md 7, "Processes" and the cancel's stop rule).
// It owns chat isolation: a caller lists only its chat's processes (a caller without a chat
// only those started without one), and a foreign process is answered exactly like an unknown one. An id it knows is never spawned again.

import type { Clock } from "../../contract/clock.ts";
import type { ProcessInfo, ProcessOutputResponse, ToolCallProcess } from "../../contract/types.ts";
import { TrackedProcess } from "./process.ts";
import { Spawner } from "./spawner.ts";

/** Longest a `wait=true` output request blocks. */
export const OUTPUT_WAIT_MAX_MS = 300_000;
/** An exited process is reaped by a list this long after its exit. */
export const REAP_AFTER_MS = 300_000;
/** A list shows at most this many processes. */
export const LIST_MAX = 10;
/** How long `closeAll` waits for the killed processes to exit. */
export const CLOSE_WAIT_MS = 5_000;
export const DEFAULT_EXIT_GRACE_MS = 250;

export interface ProcessManagerOptions {
  /** Decides every wait, grace, run age and reap. */
  clock: Clock;
  /** The working directory of a process started without `workdir`. */
  defaultDir: string;
  /** The base environment of every process; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** After the shell exits, how long a background child may hold the pipes; default 250. */
  exitGraceMs?: number;
}

export interface StartOptions {
  /** The process id: the tool call UUID, or a random UUID. The caller keeps it unique. */
  id: string;
  /** The chat of the request that started it; the process belongs to it forever. */
  chatId?: string;
  command: string;
  workdir?: string;
  /** Added to the manager's env (CODER_CHAT_ID is set after these). */
  env?: Record<string, string>;
  background?: boolean;
  /** Clock ms: the run's start instant (the tool call record's `createdAt`). */
  startedAt: number;
}

export type StartResult =
  { ok: true; id: string } | { ok: false; message: "Failed to start process."; detail: string };

export type SignalResult = "ok" | "not_found" | "not_running";

export class ProcessManager {
  readonly #clock: Clock;
  readonly #defaultDir: string;
  readonly #spawner: Spawner;
  readonly #exitGraceMs: number;
  /** Registered processes, by id, until a list reaps them. */
  readonly #procs = new Map<string, TrackedProcess>();
  /**
   * Ids being spawned. With #procs it refuses a duplicate id; once a process is reaped its id
   * could only come back through a tool call the record store already refuses, so nothing
   * here grows with the number of processes ever started.
   */
  readonly #spawning = new Set<string>();
  #seq = 0;
  #closed = false;

  constructor(o: ProcessManagerOptions) {
    this.#clock = o.clock;
    this.#defaultDir = o.defaultDir;
    this.#spawner = new Spawner({ ...(o.env ?? process.env) });
    this.#exitGraceMs = o.exitGraceMs ?? DEFAULT_EXIT_GRACE_MS;
  }

  /** Spawns `sh -c command` in its own process group; registers it only once it started. */
  async start(o: StartOptions): Promise<StartResult> {
    if (this.#closed) return failed("The process manager is closed.");
    if (this.#procs.has(o.id) || this.#spawning.has(o.id)) {
      return failed(`Process "${o.id}" already exists.`);
    }
    this.#spawning.add(o.id);
    const env: Record<string, string> = { ...o.env };
    if (o.chatId !== undefined) env.CODER_CHAT_ID = o.chatId;
    const res = await TrackedProcess.spawn({
      id: o.id,
      chatId: o.chatId,
      command: o.command,
      cwd: o.workdir ?? this.#defaultDir,
      env,
      background: o.background ?? false,
      startedAt: o.startedAt,
      seq: this.#seq++,
      clock: this.#clock,
      exitGraceMs: this.#exitGraceMs,
      spawner: this.#spawner,
    });
    this.#spawning.delete(o.id);
    if (!res.ok) return failed(res.detail);
    if (this.#closed) res.proc.signalGroup("SIGKILL"); // closeAll ran while it spawned
    this.#procs.set(o.id, res.proc);
    return { ok: true, id: o.id };
  }

  /**
   * The process's output and state, after waiting for its exit when `wait` (until exit,
   * `signal` aborts, or OUTPUT_WAIT_MAX_MS). Undefined for an unknown or foreign id.
   */
  async output(
    id: string,
    chatId: string | undefined,
    o: { wait: boolean; signal: AbortSignal },
  ): Promise<ProcessOutputResponse | undefined> {
    const proc = this.#visible(id, chatId);
    if (!proc) return undefined;
    if (o.wait) await proc.waitExited(o.signal, OUTPUT_WAIT_MAX_MS);
    const { output, truncated } = proc.render();
    return {
      output,
      ...(truncated && { truncated }),
      running: proc.running,
      ...(proc.exitCode !== undefined && { exit_code: proc.exitCode }),
      command: proc.command,
    };
  }

  /**
   * Reaps processes that exited more than REAP_AFTER_MS ago (unless `isCurrent(id)`), then
   * lists the caller's chat's (without a chat: those started without one): running first, then newest first, at most LIST_MAX.
   */
  list(
    chatId: string | undefined,
    isCurrent: (processId: string, chatId: string | undefined) => boolean,
  ): ProcessInfo[] {
    const now = this.#clock.now();
    for (const [id, proc] of this.#procs) {
      const exitedAt = proc.exitedAt;
      if (exitedAt !== undefined && now - exitedAt > REAP_AFTER_MS && !isCurrent(id, proc.chatId)) {
        this.#procs.delete(id);
      }
    }
    return [...this.#procs.values()]
      .filter((p) => p.chatId === chatId)
      .sort(
        (a, b) =>
          Number(b.running) - Number(a.running) || b.startedAt - a.startedAt || b.seq - a.seq,
      )
      .slice(0, LIST_MAX)
      .map(info);
  }

  /**
   * Every process of every chat, in list order, without reaping: for the agent's own
   * process (and tests), never served over HTTP.
   */
  all(): ProcessInfo[] {
    return [...this.#procs.values()]
      .sort(
        (a, b) =>
          Number(b.running) - Number(a.running) || b.startedAt - a.startedAt || b.seq - a.seq,
      )
      .map(info);
  }

  /** `kill` → SIGKILL, `terminate` → SIGTERM to the process group. Never marks `canceled`. */
  signal(id: string, chatId: string | undefined, sig: "kill" | "terminate"): SignalResult {
    const proc = this.#visible(id, chatId);
    if (!proc) return "not_found";
    if (!proc.running) return "not_running";
    proc.signalGroup(sig === "kill" ? "SIGKILL" : "SIGTERM");
    return "ok";
  }

  /**
   * The cancel's stop rule. A process running with run age below `stopIfRunAgeBelowMs`
   * (negative counts as 0, so 0 or less never stops) gets SIGKILL on its group, and this
   * waits for it to count as exited or for `signal` to abort. Undefined when no such process.
   * Isolation is the caller's: the id is derived from the cancel request's own chat.
   */
  async stopToolCallProcess(
    id: string,
    stopIfRunAgeBelowMs: number,
    signal: AbortSignal,
  ): Promise<ToolCallProcess | undefined> {
    const proc = this.#procs.get(id);
    if (!proc) return undefined;
    const runAge = this.#clock.now() - proc.startedAt;
    const threshold = Math.max(0, stopIfRunAgeBelowMs);
    if (proc.running && runAge < threshold) {
      proc.killForCancel();
      await proc.waitExited(signal); // the grace timer bounds it too
    }
    const { output, truncated } = proc.render();
    return {
      running: proc.running,
      canceled: proc.canceled,
      output,
      ...(truncated && { truncated }),
      ...(proc.exitCode !== undefined && { exit_code: proc.exitCode }),
      run_age_ms: Math.floor(Math.max(0, runAge)),
    };
  }

  /** Agent shutdown: SIGKILL every process group that may still live, wait for the exits. */
  async closeAll(): Promise<void> {
    this.#closed = true;
    const procs = [...this.#procs.values()];
    for (const p of procs) {
      if (p.running || p.mayLinger) p.signalGroup("SIGKILL");
    }
    await Promise.all(procs.map((p) => p.waitExited(undefined, CLOSE_WAIT_MS)));
    this.#spawner.close();
  }

  /** How many processes run, in every chat: an idle check needs it, never their details. */
  get runningCount(): number {
    let n = 0;
    for (const p of this.#procs.values()) if (p.running) n++;
    return n;
  }

  /**
   * The process if the caller may see it by id: any process for an operator (who knows the
   * id), else its chat's. Lists, which reveal ids, are per chat for everyone.
   */
  #visible(id: string, chatId: string | undefined): TrackedProcess | undefined {
    const proc = this.#procs.get(id);
    if (!proc || (chatId !== undefined && proc.chatId !== chatId)) return undefined;
    return proc;
  }
}

function failed(detail: string): StartResult {
  return { ok: false, message: "Failed to start process.", detail };
}

function info(p: TrackedProcess): ProcessInfo {
  const i: ProcessInfo = {
    id: p.id,
    command: p.command,
    workdir: p.cwd,
    background: p.background,
    running: p.running,
    started_at_unix: p.startedAtUnix,
  };
  if (p.exitCode !== undefined) i.exit_code = p.exitCode;
  if (p.exitedAtUnix !== undefined) i.exited_at_unix = p.exitedAtUnix;
  return i;
}
