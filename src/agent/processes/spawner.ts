// The agent's side of the spawner (spawner-main.js): it starts the spawner process, asks it
// to fork, and hands each process's output and exit back as events. Forking from the small
// spawner keeps the agent's event loop free and each fork as cheap as a bare Node process's.

import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const SPAWNER_MAIN = fileURLToPath(new URL("./spawner-main.js", import.meta.url));

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

type FromSpawner =
  | { t: "spawned"; id: string; pid: number }
  | { t: "failed"; id: string; message: string }
  | { t: "data"; id: string; chunk: Uint8Array }
  /** `closed`: the output had already ended, so no "close" follows. */
  | { t: "exit"; id: string; code: number | null; signal: string | null; closed: boolean }
  | { t: "close"; id: string };

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
  #child: ChildProcess | undefined;
  readonly #pending = new Map<string, (o: SpawnOutcome) => void>();
  readonly #live = new Map<string, Spawned>();

  /** `env` is the base environment of every process. */
  constructor(env: NodeJS.ProcessEnv) {
    this.#env = env;
  }

  /** The spawner's process ID while it runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  spawn(req: SpawnRequest): Promise<SpawnOutcome> {
    const child = this.#ensure();
    return new Promise((resolve) => {
      this.#pending.set(req.id, resolve);
      this.#updateRef();
      child.send({ t: "spawn", ...req });
    });
  }

  /** Stops the spawner; it kills whatever it still relays for. */
  close(): void {
    this.#child?.disconnect();
    this.#child = undefined;
  }

  #ensure(): ChildProcess {
    if (this.#child) return this.#child;
    // The spawner itself runs without loaders or options (NODE_OPTIONS would bring them back);
    // the processes it starts get the full base environment, sent first.
    const ownEnv = { ...process.env };
    delete ownEnv.NODE_OPTIONS;
    const child = fork(SPAWNER_MAIN, [], {
      env: ownEnv,
      execArgv: [],
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    child.on("message", (m: FromSpawner) => this.#receive(m));
    child.once("exit", () => this.#lost(child));
    child.send({ t: "init", env: this.#env });
    // An idle spawner must not keep the agent alive on its own (see #updateRef).
    child.unref();
    this.#child = child;
    this.#updateRef();
    return child;
  }

  /** The IPC channel keeps the event loop alive only while a spawn or a process is pending. */
  #updateRef(): void {
    const channel = this.#child?.channel;
    if (!channel) return;
    if (this.#pending.size + this.#live.size > 0) channel.ref();
    else channel.unref();
  }

  #receive(m: FromSpawner): void {
    switch (m.t) {
      case "spawned": {
        // Stays live until its close: output relayed before the stop still arrives.
        const p = new Spawned(m.pid, () => this.#child?.send({ t: "stop-reading", id: m.id }));
        this.#live.set(m.id, p);
        this.#settle(m.id, { ok: true, process: p });
        return;
      }
      case "failed":
        this.#settle(m.id, { ok: false, detail: m.message });
        return;
      case "data":
        this.#live.get(m.id)?.data(m.chunk);
        return;
      case "exit":
        this.#live.get(m.id)?.exit(m.code, m.signal);
        if (m.closed) this.#closed(m.id);
        return;
      case "close":
        this.#closed(m.id);
        return;
    }
  }

  #closed(id: string): void {
    const p = this.#live.get(id);
    this.#live.delete(id);
    this.#updateRef();
    p?.close();
  }

  #settle(id: string, outcome: SpawnOutcome): void {
    const resolve = this.#pending.get(id);
    this.#pending.delete(id);
    this.#updateRef();
    resolve?.(outcome);
  }

  /**
   * The spawner died under us: nothing relays these processes' output any more. Kill their
   * groups and let each end as killed, so no waiter waits forever; the next spawn starts a
   * new spawner.
   */
  #lost(child: ChildProcess): void {
    if (this.#child === child) this.#child = undefined;
    for (const [id, resolve] of this.#pending) {
      this.#pending.delete(id);
      resolve({ ok: false, detail: "The process spawner exited." });
    }
    for (const [id, p] of this.#live) {
      this.#live.delete(id);
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
