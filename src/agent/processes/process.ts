// One spawned `sh -c` process in its own process group, and the moment it counts as exited
// (CONTRACT.md 7): its shell has exited and its output reached end of file, or a grace period
// after the shell exited when a background child still holds the pipes. That moment is
// recorded once, so every later reader sees the same exit code, output and `canceled`.

import { spawn, type ChildProcess } from "node:child_process";

import type { Clock, Timer } from "../../contract/clock.ts";
import { OutputBuffer, type RenderedOutput } from "./output.ts";

export interface SpawnOptions {
  id: string;
  chatId: string | undefined;
  command: string;
  /** The effective working directory. */
  cwd: string;
  /** The complete environment of the shell. */
  env: NodeJS.ProcessEnv;
  background: boolean;
  /** Clock ms: the run's start instant. */
  startedAt: number;
  /** Ordering among processes with the same `startedAt`: higher is newer. */
  seq: number;
  clock: Clock;
  exitGraceMs: number;
}

export type SpawnResult = { ok: true; proc: TrackedProcess } | { ok: false; detail: string };

/** The exit, written once when the process counts as exited. */
interface Exit {
  /** Exit status of a normal exit; −1 when a signal ended the shell. */
  code: number;
  /** Clock ms. */
  at: number;
  atUnix: number;
  /** It counted as exited by the grace timer: a background child may still be alive. */
  byGrace: boolean;
  /** A cancel's kill ended it (see `killForCancel`). */
  canceled: boolean;
}

export class TrackedProcess {
  readonly id: string;
  /** The chat it was started for, or undefined; never changes. */
  readonly chatId: string | undefined;
  readonly command: string;
  readonly cwd: string;
  readonly background: boolean;
  readonly startedAt: number;
  readonly startedAtUnix: number;
  readonly seq: number;
  readonly #pid: number;
  readonly #child: ChildProcess;
  readonly #buffer: OutputBuffer;
  readonly #clock: Clock;
  readonly #exitGraceMs: number;
  /** Set by the shell's 'exit' event. */
  #shellSignaled: boolean | undefined;
  #shellCode = 0;
  #graceTimer: Timer | undefined;
  /** A cancel sent SIGKILL while the process was running. */
  #cancelKillSent = false;
  #exit: Exit | undefined;
  /** Called once at exit; each removes itself. */
  readonly #waiters = new Set<() => void>();

  private constructor(o: SpawnOptions, child: ChildProcess, pid: number, buffer: OutputBuffer) {
    this.id = o.id;
    this.chatId = o.chatId;
    this.command = o.command;
    this.cwd = o.cwd;
    this.background = o.background;
    this.startedAt = o.startedAt;
    this.startedAtUnix = Math.floor(Date.now() / 1000);
    this.seq = o.seq;
    this.#pid = pid;
    this.#child = child;
    this.#buffer = buffer;
    this.#clock = o.clock;
    this.#exitGraceMs = o.exitGraceMs;
  }

  /** Spawns the shell and resolves once it has started ('spawn') or failed ('error'). */
  static spawn(o: SpawnOptions): Promise<SpawnResult> {
    const buffer = new OutputBuffer();
    let child: ChildProcess;
    try {
      child = spawn("sh", ["-c", o.command], {
        cwd: o.cwd,
        env: o.env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
    } catch (err) {
      return Promise.resolve({ ok: false, detail: describe(err, o.cwd) });
    }
    const onData = (chunk: Buffer) => buffer.write(chunk);
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on("data", onData);
      stream?.on("error", () => {}); // a broken pipe ends the stream; 'close' still follows
    }
    return new Promise((resolve) => {
      const onError = (err: Error) => {
        child.off("spawn", onSpawn);
        resolve({ ok: false, detail: describe(err, o.cwd) });
      };
      const onSpawn = () => {
        child.off("error", onError);
        child.on("error", () => {}); // e.g. a failed kill(); never fatal
        const pid = child.pid;
        if (pid === undefined) {
          resolve({ ok: false, detail: "The process has no pid." });
          return;
        }
        const proc = new TrackedProcess(o, child, pid, buffer);
        child.once("exit", (code, signal) => proc.#onShellExit(code, signal));
        child.once("close", () => proc.#finish(false));
        resolve({ ok: true, proc });
      };
      child.once("error", onError);
      child.once("spawn", onSpawn);
    });
  }

  /** False once the process counts as exited. */
  get running(): boolean {
    return this.#exit === undefined;
  }

  get exitCode(): number | undefined {
    return this.#exit?.code;
  }

  /** Clock ms of the exit. */
  get exitedAt(): number | undefined {
    return this.#exit?.at;
  }

  get exitedAtUnix(): number | undefined {
    return this.#exit?.atUnix;
  }

  /** True only when a cancel's kill ended the process; never changes once true. */
  get canceled(): boolean {
    return this.#exit?.canceled ?? false;
  }

  /** Counted as exited by the grace timer: members of its group may still be alive. */
  get mayLinger(): boolean {
    return this.#exit?.byGrace ?? false;
  }

  render(): RenderedOutput {
    return this.#buffer.render();
  }

  /** Sends `sig` to the whole process group. A group that is gone is not an error. */
  signalGroup(sig: "SIGKILL" | "SIGTERM"): void {
    try {
      process.kill(-this.#pid, sig);
    } catch {
      // ESRCH: every member already exited. EPERM: a member changed user; nothing to do.
    }
  }

  /** The stop rule's kill: SIGKILL the group, remembering that a cancel sent it. */
  killForCancel(): void {
    if (!this.running) return;
    this.#cancelKillSent = true;
    this.signalGroup("SIGKILL");
  }

  /** Resolves when the process counts as exited, `signal` aborts, or `maxMs` (if set) pass. */
  waitExited(signal: AbortSignal | undefined, maxMs?: number): Promise<void> {
    if (!this.running || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        timer?.cancel();
        signal?.removeEventListener("abort", done);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = maxMs === undefined ? undefined : this.#clock.setTimer(maxMs, done);
      signal?.addEventListener("abort", done, { once: true });
      this.#waiters.add(done);
    });
  }

  #onShellExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.#shellSignaled = signal !== null;
    this.#shellCode = code ?? -1;
    if (this.#exit) return;
    this.#graceTimer = this.#clock.setTimer(this.#exitGraceMs, () => this.#finish(true));
  }

  /** Records the exit once: on 'close' (shell exited, pipes at EOF) or the grace timer. */
  #finish(byGrace: boolean): void {
    if (this.#exit || this.#shellSignaled === undefined) return;
    this.#graceTimer?.cancel();
    const signaled = this.#shellSignaled;
    this.#exit = {
      code: signaled ? -1 : this.#shellCode,
      at: this.#clock.now(),
      atUnix: Math.floor(Date.now() / 1000),
      byGrace,
      canceled: this.#cancelKillSent && signaled,
    };
    if (byGrace) {
      // Stop reading: the output is final from here on.
      this.#child.stdout?.destroy();
      this.#child.stderr?.destroy();
    }
    for (const wake of [...this.#waiters]) wake();
  }
}

function describe(err: unknown, cwd: string): string {
  const message = err instanceof Error ? err.message : String(err);
  return `${message} (working directory "${cwd}")`;
}
