// The campaign's real processes: a workspace agent (`bin/tether agent --listen` with a token)
// and a server (`bin/tether server` on PGlite), each in its own process group, their output
// kept line by line for the secret check, their RSS read from /proc.

import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import path from "node:path";

export const BIN = path.resolve(import.meta.dirname, "../../bin/tether");

export interface Proc {
  name: string;
  proc: ChildProcess;
  url: string;
  /** Every line it wrote (stdout and stderr), for the secret check. */
  lines: string[];
  alive(): boolean;
  /** Resident set size in bytes, or undefined when it is gone. */
  rss(): number | undefined;
  stop(): Promise<void>;
}

const live = new Set<Proc>();

/** Starts `bin/tether ...args` and resolves with its URL once it prints `listening on URL`. */
export function startProc(
  name: string,
  args: string[],
  o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; logFile?: string },
): Promise<Proc> {
  const proc = spawn(BIN, args, {
    cwd: o.cwd,
    env: o.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const log = o.logFile ? createWriteStream(o.logFile) : undefined;
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  const collect = (stream: NodeJS.ReadableStream) => {
    let rest = "";
    stream.on("data", (c: Buffer) => {
      const parts = (rest + c.toString("utf8")).split("\n");
      rest = parts.pop() ?? "";
      for (const l of parts) {
        lines.push(l);
        log?.write(`${l}\n`);
        if (process.env.TETHER_FUZZ_LOG) process.stderr.write(`[${name}] ${l}\n`);
      }
    });
  };
  collect(proc.stdout);
  collect(proc.stderr);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start: ${lines.join("\n")}`)),
      o.timeoutMs ?? 60_000,
    );
    const onData = () => {
      for (const l of lines) {
        const m = /^listening on (http:\/\/\S+)$/.exec(l);
        if (!m) continue;
        clearTimeout(timer);
        proc.stdout.off("data", onData);
        const p: Proc = {
          name,
          proc,
          url: m[1]!,
          lines,
          alive: () => proc.exitCode === null && proc.signalCode === null,
          rss: () => rssOf(proc.pid!),
          async stop() {
            live.delete(p);
            if (p.alive()) {
              proc.kill("SIGTERM");
              await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
            }
            try {
              process.kill(-proc.pid!, "SIGKILL");
            } catch {
              // gone
            }
          },
        };
        live.add(p);
        resolve(p);
        return;
      }
    };
    proc.stdout.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited ${code}: ${lines.join("\n")}`));
    });
  });
}

export function rssOf(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Stops every process still running (a campaign that failed half-way). */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop()));
}
