// spawner.c, compiled with the system's C compiler into `dist/spawner/<hash>/`: at `npm ci`
// (bin/cli-build.mjs) and otherwise at the first spawn that needs it. The hash is the source's,
// so an edit builds again and a build is never stale. Where nothing compiles it (no compiler,
// not Linux, a read-only checkout without a build) the agent uses spawner-main.js instead.
//
// Plain JavaScript, for bin/cli-build.mjs, which runs before any TypeScript can.

import { execFileSync, spawnSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import path from "node:path";

const PROGRAM = "tether-spawner";
/** Per process: the source's path and where its build goes, to the program or undefined. */
const known = new Map();

/**
 * The compiled spawner for `source` under `outDir` (`<checkout>/dist/spawner`), built first
 * when missing; undefined where it cannot be built or run here.
 */
export function nativeSpawner(source, outDir) {
  const key = `${source}\0${outDir}`;
  if (!known.has(key)) {
    const program = build(source, outDir);
    known.set(key, program !== undefined && runs(program) ? program : undefined);
  }
  return known.get(key);
}

/**
 * Whether the program starts here: a checkout mounted into a workspace may hold a build made
 * for another C library, or one this user may not run. With nothing on stdin it exits at once.
 */
function runs(program) {
  return spawnSync(program, [], { stdio: "ignore", timeout: 10_000 }).status === 0;
}

function build(source, outDir) {
  if (process.platform !== "linux") return undefined; // spawner.c uses Linux's pipe2 and glibc's spawn
  let code;
  try {
    code = readFileSync(source);
  } catch {
    return undefined;
  }
  const dir = path.join(outDir, createHash("sha256").update(code).digest("hex").slice(0, 16));
  const program = path.join(dir, PROGRAM);
  if (existsSync(program)) return program;
  const tmp = path.join(dir, `${PROGRAM}.${process.pid}-${randomUUID()}`);
  try {
    mkdirSync(dir, { recursive: true });
    execFileSync(process.env.CC || "cc", ["-O2", "-o", tmp, source], {
      stdio: "ignore",
      timeout: 60_000,
    });
    // Whoever runs an agent from this checkout may run it (a workspace's user, say), whatever
    // the umask of the process that built it.
    for (const d of [outDir, dir]) chmodSync(d, 0o755);
    chmodSync(tmp, 0o755);
    renameSync(tmp, program); // atomic: another process building at once wrote the same bytes
    return program;
  } catch {
    rmSync(tmp, { force: true });
    return undefined;
  }
}
