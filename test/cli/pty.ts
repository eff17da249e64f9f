// A command under a real pseudo-terminal (python3's pty module: no native addon), with a window
// size or none (0×0, as under `script`): what it prints, keys typed into it (Ctrl-C is "\x03",
// Ctrl-D "\x04", Enter "\r"), and its exit status. Killed with its terminal after the test.

import { spawn } from "node:child_process";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";

const DRIVER = path.join(import.meta.dirname, "terminal.py");

/**
 * The lines a terminal shows for `raw`, roughly: on each line, what follows its last move to
 * column 1 (a spinner's redraw, a carriage return), without escape sequences. Text that a
 * spinner's redraw overwrote is not there.
 */
export function visibleText(raw: string): string {
  return raw
    .split("\n")
    .map((l) => {
      const line = l.replace(/\r$/, "");
      const cut = Math.max(line.lastIndexOf("\x1b[1G"), line.lastIndexOf("\r"));
      return stripVTControlCharacters(cut < 0 ? line : line.slice(cut));
    })
    .join("\n");
}

export interface PtyProcess {
  /** Everything the command printed so far (stdout and stderr, as the terminal got them). */
  output(): string;
  /** The same as the terminal shows it (visibleText). */
  screen(): string;
  type(keys: string): void;
  /** Resolves once `cond` holds on the screen; rejects after `ms` with the screen so far. */
  waitFor(what: string, cond: (out: string) => boolean, ms?: number): Promise<void>;
  /** The command's exit status (128 + N for signal N). */
  exit: Promise<number | null>;
  kill(): void;
}

export function runInPty(
  command: string[],
  o: { rows: number; cols: number; cwd: string; env?: Record<string, string> },
): PtyProcess {
  const proc = spawn("python3", [DRIVER, String(o.rows), String(o.cols), ...command], {
    cwd: o.cwd,
    env: { ...process.env, TERM: "xterm-256color", ...o.env },
    stdio: ["pipe", "pipe", "inherit"],
    detached: true,
  });
  let out = "";
  proc.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
  const exit = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return {
    output: () => out,
    screen: () => visibleText(out),
    type: (keys) => void proc.stdin.write(keys),
    waitFor: async (what, cond, ms = 20_000) => {
      const end = Date.now() + ms;
      while (!cond(visibleText(out))) {
        if (Date.now() > end)
          throw new Error(`not in ${ms} ms: ${what}; screen:\n${visibleText(out)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    exit,
    kill: () => {
      try {
        process.kill(-proc.pid!, "SIGKILL");
      } catch {
        // gone
      }
    },
  };
}
