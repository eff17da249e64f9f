// The agent's side of the spawner (spawner.c, or spawner-main.js where it does not compile):
// it starts the spawner process, asks it to fork, and hands each process's output and exit
// back as events. Forking from the small spawner keeps the agent's event loop free, and from
// spawner.c a fork costs what posix_spawn costs, whatever the agent's size.

import { spawn, type ChildProcessByStdio } from "node:child_process";
import { constants } from "node:os";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { nativeSpawner } from "./native-spawner.js";
import { encodeEnv, encodeFrame, FrameError, FrameReader } from "./spawner-frames.js";

const SPAWNER_MAIN = fileURLToPath(new URL("./spawner-main.js", import.meta.url));
const SPAWNER_C = fileURLToPath(new URL("./spawner.c", import.meta.url));
/** The checkout's `dist/spawner`, beside the CLI's build. */
const NATIVE_OUT = fileURLToPath(new URL("../../../dist/spawner", import.meta.url));

/** How to run a spawner: a program and its arguments. */
export type SpawnerProgram = readonly [string, ...string[]];

/** The JavaScript spawner, run by this Node. */
export const NODE_SPAWNER: SpawnerProgram = [process.execPath, SPAWNER_MAIN];

/** The C spawner when it is (or can be) built here, else the JavaScript one. */
export function defaultSpawnerProgram(): SpawnerProgram {
  const native = nativeSpawner(SPAWNER_C, NATIVE_OUT);
  return native === undefined ? NODE_SPAWNER : [native];
}

const SIGNAL_NAMES = new Map<number, string>(
  Object.entries(constants.signals).map(([name, n]) => [n, name]),
);

export interface SpawnRequest {
  id: string;
  command: string;
  cwd: string;
  /** Added to the spawner's environment (the agent's, or the manager's `env`). */
  env: Record<string, string>;
}

/** What happens to a process, in order: data…, exit, then close. */
export interface ProcessEvents {
  /** Output bytes, stdout and stderr as they come. */
  data(chunk: Uint8Array): void;
  /** The shell exited. */
  exit(code: number | null, signal: string | null): void;
  /** No more output comes: the pipes reached end of file, or reading stopped (stopReading). */
  close(): void;
}

/** A process the spawner started. */
export interface SpawnedProcess {
  readonly pid: number;
  /**
   * Delivers the process's events to `events`, starting with any that arrived before
   * (several IPC messages can land in the same tick as the spawn answer).
   */
  listen(events: ProcessEvents): void;
  /**
   * Stops reading the pipes (a background child may hold them for ever): the spawner relays
   * what they hold now, then close follows; nothing arrives after it.
   */
  stopReading(): void;
}

export type SpawnOutcome = { ok: true; process: SpawnedProcess } | { ok: false; detail: string };

/** Its stdin and stdout are pipes: sockets, which can stop holding the event loop open. */
type SpawnerChild = ChildProcessByStdio<Socket, Socket, null>;

class Spawned implements SpawnedProcess, ProcessEvents {
  /** Events that arrived before `listen`, replayed to it in order. */
  #early: ((e: ProcessEvents) => void)[] | undefined = [];
  #events: ProcessEvents | undefined;

  constructor(
    readonly pid: number,
    private readonly stop: () => void,
  ) {}

  listen(events: ProcessEvents): void {
    const early = this.#early ?? [];
    this.#early = undefined;
    this.#events = events;
    for (const deliver of early) deliver(events);
  }

  stopReading(): void {
    this.stop();
  }

  #emit(deliver: (e: ProcessEvents) => void): void {
    if (this.#events) deliver(this.#events);
    else this.#early?.push(deliver);
  }

  data(chunk: Uint8Array): void {
    this.#emit((e) => e.data(chunk));
  }

  exit(code: number | null, signal: string | null): void {
    this.#emit((e) => e.exit(code, signal));
  }

  close(): void {
    this.#emit((e) => e.close());
  }
}

export class Spawner {
  readonly #env: NodeJS.ProcessEnv;
  /** Chosen at the first spawn: finding (or building) and probing the C one runs processes. */
  #program: SpawnerProgram | undefined;
  #child: SpawnerChild | undefined;
  /** Handles name processes on the wire; the next one. */
  #nextHandle = 1;
  readonly #pending = new Map<number, (o: SpawnOutcome) => void>();
  readonly #live = new Map<number, Spawned>();

  /** `env` is the base environment of every process. */
  constructor(env: NodeJS.ProcessEnv, o: { program?: SpawnerProgram } = {}) {
    this.#env = env;
    this.#program = o.program;
  }

  /** The spawner's process ID while it runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  spawn(req: SpawnRequest): Promise<SpawnOutcome> {
    // A NUL would end the string early on the wire, and no exec can take one.
    const texts = [req.command, req.cwd, ...Object.entries(req.env).flat()];
    if (texts.some((t) => t.includes("\0")))
      return Promise.resolve({
        ok: false,
        detail: "The command, directory or environment contains a NUL byte.",
      });
    const child = this.#ensure();
    const handle = this.#nextHandle;
    this.#nextHandle = (this.#nextHandle % 0xfffffffe) + 1;
    return new Promise((resolve) => {
      this.#pending.set(handle, resolve);
      this.#updateRef();
      const payload = `${req.cwd}\0${req.command}\0${encodeEnv(req.env)}`;
      child.stdin.write(encodeFrame("s", handle, Buffer.from(payload)));
    });
  }

  /** Stops the spawner; it kills whatever it still relays for. */
  close(): void {
    this.#child?.stdin.end();
    this.#child = undefined;
  }

  #ensure(): SpawnerChild {
    if (this.#child) return this.#child;
    // The spawner itself runs without loaders or options (NODE_OPTIONS would bring them back);
    // the processes it starts get the full base environment, sent first.
    const ownEnv = { ...process.env };
    delete ownEnv.NODE_OPTIONS;
    this.#program ??= defaultSpawnerProgram();
    const [command, ...args] = this.#program;
    const child = spawn(command, args, {
      env: ownEnv,
      stdio: ["pipe", "pipe", "inherit"],
    }) as SpawnerChild;
    const frames = new FrameReader();
    child.stdout.on("data", (chunk: Buffer) => {
      try {
        frames.push(chunk, (type, handle, payload) => this.#receive(type, handle, payload));
      } catch (err) {
        if (!(err instanceof FrameError)) throw err;
        child.kill("SIGKILL"); // it wrote something other than frames: its exit ends its processes
      }
    });
    child.stdin.on("error", () => {}); // it died: its exit says so (#lost)
    child.once("exit", () => this.#lost(child));
    child.once("error", () => this.#lost(child)); // it could not start
    child.stdin.write(encodeFrame("e", 0, Buffer.from(encodeEnv(this.#env))));
    // An idle spawner must not keep the agent alive on its own (see #updateRef).
    child.unref();
    child.stdin.unref();
    this.#child = child;
    this.#updateRef();
    return child;
  }

  /** The spawner's output keeps the event loop alive only while a spawn or a process is pending. */
  #updateRef(): void {
    const out = this.#child?.stdout;
    if (this.#pending.size + this.#live.size > 0) out?.ref();
    else out?.unref();
  }

  #receive(type: string, handle: number, payload: Buffer): void {
    switch (type) {
      case "p": {
        // Stays live until its close: output relayed before the stop still arrives.
        const p = new Spawned(payload.readInt32LE(0), () =>
          this.#child?.stdin.write(encodeFrame("r", handle)),
        );
        this.#live.set(handle, p);
        this.#settle(handle, { ok: true, process: p });
        return;
      }
      case "f":
        this.#settle(handle, { ok: false, detail: payload.toString() });
        return;
      case "d":
        this.#live.get(handle)?.data(payload);
        return;
      case "x": {
        const code = payload.readInt32LE(0);
        const signal = payload.readInt32LE(4);
        this.#live
          .get(handle)
          ?.exit(
            code < 0 ? null : code,
            signal === 0 ? null : (SIGNAL_NAMES.get(signal) ?? `signal ${signal}`),
          );
        // The output had already ended: no close follows.
        if (payload[8] === 1) this.#closed(handle);
        return;
      }
      case "c":
        this.#closed(handle);
        return;
    }
  }

  #closed(handle: number): void {
    const p = this.#live.get(handle);
    this.#live.delete(handle);
    this.#updateRef();
    p?.close();
  }

  #settle(handle: number, outcome: SpawnOutcome): void {
    const resolve = this.#pending.get(handle);
    this.#pending.delete(handle);
    this.#updateRef();
    resolve?.(outcome);
  }

  /**
   * The spawner died under us: nothing relays these processes' output any more. Kill their
   * groups and let each end as killed, so no waiter waits forever; the next spawn starts a
   * new spawner.
   */
  #lost(child: SpawnerChild): void {
    if (this.#child === child) this.#child = undefined;
    for (const [handle, resolve] of this.#pending) {
      this.#pending.delete(handle);
      resolve({ ok: false, detail: "The process spawner exited." });
    }
    for (const [handle, p] of this.#live) {
      this.#live.delete(handle);
      try {
        process.kill(-p.pid, "SIGKILL");
      } catch {
        // already gone
      }
      p.exit(null, "SIGKILL");
      p.close();
    }
  }
}
