// Real `bin/tether` processes for the fault campaign: each in its own process group (so a
// SIGKILL takes the whole group, like a crashed container), ready once it prints its
// `listening on http://...` line (a dial-out agent: its `connected to http://...` line). Every
// process started here is tracked and killed by killAll.

import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import path from "node:path";

/** This checkout's CLI; TETHER_CHAOS_BIN runs the campaign against another build's. */
export const BIN =
  process.env.TETHER_CHAOS_BIN ?? path.resolve(import.meta.dirname, "../../bin/tether");

/** How long a process may take to print its listening line on a loaded machine. */
const START_TIMEOUT_MS = 60_000;
/** The line a server or a listening agent prints once it serves. */
const LISTENING_RE = /^listening on (http:\/\/\S+)$/m;
/** The line a dial-out agent prints each time it connected to its server. */
export const CONNECTED_RE = /^connected to (http:\/\/\S+)$/m;

export interface TetherProcess {
  proc: ChildProcess;
  /** The URL of its ready line: where it listens (a dial-out agent: the server it reached). */
  url: string;
  /** Its stdout so far (a dial-out agent prints a `connected to` line on every connect). */
  stdout(): string;
  readonly exited: Promise<void>;
  /** Signals the whole process group; resolves once the process is gone. */
  kill(signal: NodeJS.Signals): Promise<void>;
}

const live = new Set<TetherProcess>();

/**
 * Starts `bin/tether <args>`; stderr lines go to `onStderrLine` and, when `logFile` is set,
 * are appended there. Rejects when the process exits before it listens.
 */
export function startTether(
  args: string[],
  o: {
    cwd?: string;
    logFile?: string;
    onStderrLine?: (line: string) => void;
    /** Added to the inherited environment. */
    env?: Record<string, string>;
    /** Its ready line, whose first group is its URL (LISTENING_RE by default). */
    ready?: RegExp;
  } = {},
): Promise<TetherProcess> {
  const proc = spawn(BIN, args, {
    cwd: o.cwd,
    ...(o.env && { env: { ...process.env, ...o.env } }),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log: WriteStream | undefined = o.logFile
    ? createWriteStream(o.logFile, { flags: "a" })
    : undefined;
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  void exited.then(() => log?.end());
  let errTail = "";
  let partial = "";
  proc.stderr.on("data", (c: Buffer) => {
    const text = c.toString();
    log?.write(text);
    errTail = (errTail + text).slice(-4000);
    partial += text;
    const lines = partial.split("\n");
    partial = lines.pop()!;
    for (const line of lines) o.onStderrLine?.(line);
  });
  let out = "";
  proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
  const p: TetherProcess = {
    proc,
    url: "",
    stdout: () => out,
    exited,
    async kill(signal) {
      try {
        process.kill(-proc.pid!, signal);
      } catch {
        // already gone
      }
      await exited;
      live.delete(p);
    },
  };
  live.add(p);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void p.kill("SIGKILL");
      reject(new Error(`bin/tether ${args[0]} did not listen in time: ${errTail}`));
    }, START_TIMEOUT_MS);
    proc.stdout.on("data", () => {
      const m = (o.ready ?? LISTENING_RE).exec(out);
      if (m && p.url === "") {
        clearTimeout(timer);
        p.url = m[1]!;
        resolve(p);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      live.delete(p);
      if (p.url === "") reject(new Error(`bin/tether ${args[0]} exited: ${errTail}`));
    });
  });
}

/** SIGKILLs every process group this module started and still runs. */
export async function killAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill("SIGKILL")));
}
