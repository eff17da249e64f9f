// Benchmark: how long `bin/tether server` takes to answer GET /api/v1/health, on the embedded
// database — the first start (initdb) once, then restarts on the existing data dir — run from
// the CLI's build (bin/cli-build.mjs) and, as the baseline in the same run, from the TypeScript
// sources through tsx (TETHER_CLI_BUILD=0), the modes interleaved. Also when the `listening on`
// line appears (the local agent registered and the worker started), and the CPU time the server
// used until health answered, which a loaded machine does not inflate. Target: health within 2 s.

import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fmt, numberFlags, ROOT, stats } from "./support.ts";

const { restarts } = numberFlags({ restarts: 5 });
const BIN = path.join(ROOT, "bin/tether");
const HEALTH_POLL_MS = 10;
const START_BOUND_MS = 120_000;

interface Start {
  healthMs: number;
  listeningMs: number;
  /** CPU time (user + system) the server process used until health answered: load-proof. */
  cpuMs: number;
}

const TICK_MS = 10; // USER_HZ 100 on Linux

/** User + system CPU time of process `pid` so far (Linux /proc), in ms. */
async function cpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

// Health is polled before the `listening on` line shows the address, so the port is chosen here:
// below Linux's ephemeral range (32768 up), where another process's outgoing connection cannot
// hold it (one did, in a run: EADDRINUSE).
let nextPort = 20_000 + Math.floor(Math.random() * 12_000);

/** One start on `dataDir` until health answers and the listening line is out; then a stop. */
async function start(
  dataDir: string,
  workspaceDir: string,
  env: NodeJS.ProcessEnv,
): Promise<Start> {
  const port = nextPort++;
  const t0 = performance.now();
  const proc = spawn(
    BIN,
    [
      "server",
      ...["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--workspace-dir", workspaceDir],
      ...["--model", "demo", "--log-level", "warn"],
    ],
    { cwd: ROOT, env, stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  try {
    const listening = new Promise<number>((resolve, reject) => {
      let out = "";
      proc.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        if (/listening on /.test(out)) resolve(performance.now() - t0);
      });
      proc.once("exit", (code) => reject(new Error(`server exited with ${code}`)));
    });
    listening.catch(() => undefined);
    let healthMs: number | undefined;
    let cpuMs = 0;
    while (healthMs === undefined) {
      if (performance.now() - t0 > START_BOUND_MS) throw new Error("no health answer");
      if (proc.exitCode !== null) await listening; // rethrows the exit
      try {
        const r = await fetch(`http://127.0.0.1:${port}/api/v1/health`);
        if (r.ok) {
          healthMs = performance.now() - t0;
          cpuMs = await cpuMsOf(proc.pid!);
        }
      } catch {
        await new Promise((r) => setTimeout(r, HEALTH_POLL_MS));
      }
    }
    return { healthMs, listeningMs: await listening, cpuMs };
  } finally {
    if (proc.exitCode === null) proc.kill("SIGTERM");
    await exited;
  }
}

const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
const modes: [string, NodeJS.ProcessEnv][] = [
  ["build (bin/cli-build.mjs)", { ...process.env }],
  ["sources through tsx", { ...process.env, TETHER_CLI_BUILD: "0" }],
];
const workspaceDir = await mkdtemp(path.join(os.tmpdir(), "tether-bench-ws-"));
const dataDirs = await Promise.all(
  modes.map(() => mkdtemp(path.join(os.tmpdir(), "tether-bench-data-"))),
);
console.log(`load average at start: ${load()} (${os.cpus().length} cores)`);
try {
  const first = new Map<string, Start>();
  const again = new Map<string, Start[]>(modes.map(([name]) => [name, []]));
  for (const [i, [name, env]] of modes.entries())
    first.set(name, await start(dataDirs[i]!, workspaceDir, env));
  for (let r = 0; r < restarts; r++)
    for (const [i, [name, env]] of modes.entries())
      again.get(name)!.push(await start(dataDirs[i]!, workspaceDir, env));

  console.log(`bin/tether server on the embedded database: first start, then ${restarts} restarts`);
  console.log(
    "mode                          first: health  listening   cpu    restart: health median  p99    listening  cpu (medians)",
  );
  for (const [name] of modes) {
    const f = first.get(name)!;
    const h = stats(again.get(name)!.map((s) => s.healthMs));
    const l = stats(again.get(name)!.map((s) => s.listeningMs));
    const c = stats(again.get(name)!.map((s) => s.cpuMs));
    console.log(
      `${name.padEnd(30)}${fmt(f.healthMs, 0).padStart(11)} ms${fmt(f.listeningMs, 0).padStart(8)} ms${fmt(f.cpuMs, 0).padStart(6)} ms${fmt(h.median, 0).padStart(18)} ms${fmt(h.p99, 0).padStart(7)} ms${fmt(l.median, 0).padStart(8)} ms${fmt(c.median, 0).padStart(6)} ms`,
    );
  }
  const built = stats(again.get(modes[0]![0])!.map((s) => s.healthMs));
  const tsx = stats(again.get(modes[1]![0])!.map((s) => s.healthMs));
  console.log(`restart health, build/tsx (median): ${fmt(built.median / tsx.median, 2)}x`);
  console.log(
    `target: a restart answers health within 2000 ms (median): ${built.median <= 2000 ? "MET" : "NOT MET"} (${fmt(built.median, 0)} ms)`,
  );
  console.log(`load average at end: ${load()}`);
} finally {
  await Promise.all(
    [workspaceDir, ...dataDirs].map((d) => rm(d, { recursive: true, force: true })),
  );
}
