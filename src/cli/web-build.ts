// The web UI's build, run by `tether server` at start: the quickstart is `npm ci && bin/tether
// server`, so the server itself builds `web/dist` when it is missing or older than any source
// under `web/` (a `git pull` that changes the UI rebuilds on the next start). Vite is a dev
// dependency: without it (a production install) the server serves what is there, or the API's
// "not built" page.

import { spawn } from "node:child_process";
import { readdir, rename, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import type { Logger } from "pino";

const require = createRequire(import.meta.url);

export const WEB_DIR = path.resolve(import.meta.dirname, "../../web");

/** The newest modification time of the files under `dir`, skipping `skip` directories. */
async function newestMtime(dir: string, skip: Set<string>): Promise<number> {
  let newest = 0;
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (skip.has(e.name)) continue;
    const p = path.join(dir, e.name);
    const t = e.isDirectory() ? await newestMtime(p, skip) : (await stat(p)).mtimeMs;
    newest = Math.max(newest, t);
  }
  return newest;
}

async function mtime(p: string): Promise<number | undefined> {
  try {
    return (await stat(p)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Whether `web/dist` is missing or older than the UI's sources. */
export async function webBuildStale(webDir = WEB_DIR): Promise<boolean> {
  const built = await mtime(path.join(webDir, "dist", "index.html"));
  if (built === undefined) return true;
  return (await newestMtime(webDir, new Set(["dist", "node_modules"]))) > built;
}

/**
 * Builds the UI into `web/dist` when it is stale; returns the web root to serve. The build goes
 * to a directory of its own and is renamed into place, so two servers starting at once never
 * serve (or write) a half-built tree.
 */
export async function ensureWebBuilt(log: Logger, webDir = WEB_DIR): Promise<string> {
  const dist = path.join(webDir, "dist");
  if (!(await webBuildStale(webDir))) return dist;
  let viteBin: string;
  try {
    viteBin = path.join(path.dirname(require.resolve("vite/package.json")), "bin", "vite.js");
  } catch {
    log.warn({ webDir }, "web UI not built and vite is not installed: serving the API only");
    return dist;
  }
  const tmp = `${dist}.build-${process.pid}`;
  log.info({ webDir }, "building the web UI (web/dist is missing or older than web/)");
  const started = Date.now();
  // A child process with NODE_ENV=production: React's production build whatever this process's
  // NODE_ENV is (vitest sets "test", which would select React's development build).
  const child = spawn(process.execPath, [viteBin, "build", webDir, "--outDir", tmp], {
    env: { ...process.env, NODE_ENV: "production" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((r) => child.once("exit", r));
  if (code === 0) {
    await rm(dist, { recursive: true, force: true });
    // Another server starting at the same time may have renamed its build into place first:
    // the same sources, so either build serves.
    await rename(tmp, dist).catch(() => rm(tmp, { recursive: true, force: true }));
    log.info({ ms: Date.now() - started }, "web UI built");
  } else {
    log.error({ code, stderr }, "web UI build failed: serving the previous build, if any");
    await rm(tmp, { recursive: true, force: true });
  }
  return dist;
}
