// Shared pieces of the benchmarks: child servers that print `listening on URL`, and stats.

import { readdir, readFile } from "node:fs/promises";
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface Child {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** `bin/tether agent` on a free port, serving `dir`. */
export function startAgent(dir: string): Promise<Child> {
  return startChild(path.join(ROOT, "bin/tether"), [
    "agent",
    "--listen",
    "127.0.0.1:0",
    "--dir",
    dir,
  ]);
}

/**
 * The fake model server (bench/fake-model.ts) in a process of its own, so a benchmark's own
 * process (its clients, its in-memory loops) does not also serve the model's answers.
 */
export function startFakeModel(steps: number): Promise<Child> {
  return startChild(process.execPath, [
    "--import",
    "tsx",
    path.join(ROOT, "bench/fake-model.ts"),
    String(steps),
  ]);
}

/** Runs a plain JavaScript baseline server of this repository with plain node. */
export function startScript(file: string): Promise<Child> {
  return startChild(process.execPath, [path.join(ROOT, file)]);
}

/**
 * Starts a server process and resolves with the URL it prints (`listening on URL`). Its
 * stderr goes to ours, or to `o.stderr` (an open file descriptor, e.g. a log file).
 */
export function startChild(
  command: string,
  args: string[],
  o: { stderr?: number } = {},
): Promise<Child> {
  // BENCH_CHILD_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") runs each child under
  // node with those flags, to profile the server or agent a benchmark measures.
  const nodeArgs = process.env.BENCH_CHILD_NODE_ARGS?.split(" ").filter(Boolean) ?? [];
  if (nodeArgs.length > 0 && command !== process.execPath) {
    args = [...nodeArgs, command, ...args];
    command = process.execPath;
  }
  const proc = spawn(command, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", o.stderr ?? "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) {
        resolve({
          url: m[1]!,
          proc,
          stop: () =>
            new Promise<void>((r) => {
              if (proc.exitCode !== null) return r();
              proc.once("exit", () => r());
              proc.kill("SIGTERM");
            }),
        });
      }
    });
    proc.once("exit", (code) =>
      reject(new Error(`${args.join(" ")} exited with ${code} before listening`)),
    );
  });
}

/** The index of quantile `q` in `n` sorted samples (nearest rank). */
export function rankOf(n: number, q: number): number {
  return Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
}

export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[rankOf(sorted.length, q)]!;
}

export interface Stats {
  median: number;
  p99: number;
  n: number;
}

export function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  return { median: quantile(s, 0.5), p99: quantile(s, 0.99), n: s.length };
}

export function fmt(n: number, digits = 3): string {
  return n.toFixed(digits);
}

/** Parses `--name value` flags into numbers, with defaults. */
export function numberFlags<T extends Record<string, number>>(defaults: T): T {
  const out: Record<string, number> = { ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(.+)$/.exec(argv[i]!);
    if (m && m[1]! in out) out[m[1]!] = Number(argv[++i]);
  }
  return out as T;
}

/** CPU seconds (user + system) a live process has used, from /proc/<pid>/stat. */
export async function cpuSeconds(pid: number): Promise<number> {
  const [utime, stime] = await statTimes(pid);
  return (utime + stime) / CLOCK_TICKS_PER_S;
}

/**
 * utime, stime, cutime and cstime of a process (fields 14 to 17 of /proc/<pid>/stat, after the
 * command name, which may hold spaces), in clock ticks; zeros when it is gone.
 */
async function statTimes(pid: number): Promise<[number, number, number, number]> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  if (stat === "") return [0, 0, 0, 0];
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return [Number(f[11]), Number(f[12]), Number(f[13]), Number(f[14])];
}

/**
 * CPU seconds of a live process and everything under it: its own, its live descendants' (an
 * agent's spawner), and those of the children each of them has waited for (the commands the
 * spawner ran), from /proc.
 */
export async function treeCpuSeconds(pid: number): Promise<number> {
  let s = (await statTimes(pid)).reduce((a, b) => a + b, 0) / CLOCK_TICKS_PER_S;
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  for (const tid of tasks) {
    const children = await readFile(`/proc/${pid}/task/${tid}/children`, "utf8").catch(() => "");
    for (const child of children.split(" ").filter(Boolean))
      s += await treeCpuSeconds(Number(child));
  }
  return s;
}
/** USER_HZ: the unit of /proc's CPU times (100 on Linux everywhere but exotic builds). */
const CLOCK_TICKS_PER_S = 100;
