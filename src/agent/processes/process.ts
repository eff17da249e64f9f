// One spawned `sh -c` process in its own process group, and the moment it counts as exited
// (CONTRACT.md 7): its shell has exited and its output reached end of file, or a grace period
// after the shell exited when a background child still holds the pipes. That moment is
// recorded once, so every later reader sees the same exit code, output and `canceled`. The
// grace ends reading, never the output the shell wrote: the spawner relays what the pipes hold
// before it says "closed", and only then is the exit recorded (a busy agent can read a shell's
// exit before the last of its output, which the spawner held back under backpressure).

import type { Clock, Timer } from "../../contract/clock.ts";
import { OutputBuffer, type RenderedOutput } from "./output.ts";
import type { SpawnedProcess, Spawner } from "./spawner.ts";

export interface SpawnOptions {
  id: string;
  chatId: string | undefined;
  command: string;
  /** The effective working directory. */
  cwd: string;
  /** Added to the spawner's base environment. */
  env: Record<string, string>;
  spawner: Spawner;
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
  readonly #child: SpawnedProcess;
  readonly #buffer: OutputBuffer;
  readonly #clock: Clock;
  readonly #exitGraceMs: number;
  /** Set by the shell's 'exit' event. */
  #shellSignaled: boolean | undefined;
  #shellCode = 0;
  #graceTimer: Timer | undefined;
  /** The grace passed and the spawner was asked to stop reading; its close ends the output. */
  #graceExpired = false;
  /** The spawner said no more output comes (end of file, or reading stopped). */
  #outputClosed = false;
  /** A cancel sent SIGKILL while the process was running. */
  #cancelKillSent = false;
  #exit: Exit | undefined;
  /** Called once at exit; each removes itself. */
  readonly #waiters = new Set<() => void>();

  private constructor(o: SpawnOptions, child: SpawnedProcess, pid: number, buffer: OutputBuffer) {
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

  /** Spawns the shell (through the spawner) and resolves once it has started or failed. */
  static async spawn(o: SpawnOptions): Promise<SpawnResult> {
    const spawned = await o.spawner.spawn({ id: o.id, command: o.command, cwd: o.cwd, env: o.env });
    if (!spawned.ok)
      return { ok: false, detail: `${spawned.detail} (working directory "${o.cwd}")` };
    const child = spawned.process;
    const buffer = new OutputBuffer();
    const proc = new TrackedProcess(o, child, child.pid, buffer);
    child.listen({
      data: (chunk) => buffer.write(chunk),
      exit: (code, signal) => proc.#onShellExit(code, signal),
      close: () => proc.#onOutputClosed(),
    });
    return { ok: true, proc };
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

  #onShellExit(code: number | null, signal: string | null): void {
    this.#shellSignaled = signal !== null;
    this.#shellCode = code ?? -1;
    if (this.#exit) return;
    if (this.#outputClosed) return this.#finish();
    this.#graceTimer = this.#clock.setTimer(this.#exitGraceMs, () => this.#onGraceExpired());
  }

  /**
   * A background child may hold the pipes for ever: stop reading them. The spawner first relays
   * what they hold (the shell's last output may still be there), then closes; the exit is
   * recorded at that close, so no byte written before it is lost.
   */
  #onGraceExpired(): void {
    if (this.#exit || this.#graceExpired) return;
    this.#graceExpired = true;
    this.#child.stopReading();
  }

  #onOutputClosed(): void {
    this.#outputClosed = true;
    this.#finish();
  }

  /** Records the exit once, when the shell has exited and its output is closed. */
  #finish(): void {
    if (this.#exit || this.#shellSignaled === undefined || !this.#outputClosed) return;
    this.#graceTimer?.cancel();
    const signaled = this.#shellSignaled;
    this.#exit = {
      code: signaled ? -1 : this.#shellCode,
      at: this.#clock.now(),
      atUnix: Math.floor(Date.now() / 1000),
      byGrace: this.#graceExpired,
      canceled: this.#cancelKillSent && signaled,
    };
    for (const wake of [...this.#waiters]) wake();
  }
}
