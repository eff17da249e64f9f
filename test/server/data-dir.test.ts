// The server's data never sits inside a workspace: the default data dir follows the XDG
// convention instead of the current directory, a data dir inside the local workspace (or the
// reverse) is refused, symlinks resolved, and the data dir is the server's alone (0700, files
// 0600) while the files the workspace's commands make keep the user's umask.

import { spawn } from "node:child_process";
import { lstat, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BIN, startServerProcess } from "../support/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-data-dir-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

/** `bin/tether server ARGS` until it exits, or until it listens (then it is stopped). */
function serverOutcome(args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) {
  const proc = spawn(BIN, ["server", "--listen", "127.0.0.1:0", "--model", "demo", ...args], {
    cwd,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise<{ listened: boolean; code: number | null; stderr: string }>((resolve) => {
    proc.stdout.on("data", (c: Buffer) => {
      if (!c.toString().includes("listening on")) return;
      process.kill(-proc.pid!, "SIGKILL");
      resolve({ listened: true, code: null, stderr });
    });
    proc.once("exit", (code) => resolve({ listened: false, code, stderr }));
  });
}

/** Every entry under `dir` with its permission bits. */
async function modes(dir: string): Promise<{ path: string; dir: boolean; mode: number }[]> {
  const out: { path: string; dir: boolean; mode: number }[] = [];
  const walk = async (p: string): Promise<void> => {
    const st = await lstat(p);
    if (st.isSymbolicLink()) return;
    out.push({ path: p, dir: st.isDirectory(), mode: st.mode & 0o777 });
    if (st.isDirectory()) for (const n of await readdir(p)) await walk(path.join(p, n));
  };
  await walk(dir);
  return out;
}

function chat(server: string, cwd: string, message: string) {
  const proc = spawn(BIN, ["chat", "--server", server, message], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: path.join(cwd, "config") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  return new Promise<{ code: number | null; stdout: string }>((resolve) =>
    proc.once("exit", (code) => resolve({ code, stdout })),
  );
}

describe("the server's data dir", () => {
  it("is refused inside the local workspace: by default in HOME, and with --data-dir, with what to do", async () => {
    const ws = await tempDir();
    const other = await tempDir();
    const refusals: [string, string[], string, NodeJS.ProcessEnv?][] = [
      // The default: a server started in the home directory would keep
      // ~/.local/share/tether in its workspace.
      ["by default in HOME", [], ws, { ...process.env, HOME: ws, XDG_DATA_HOME: "" }],
      ["inside", ["--workspace-dir", ws, "--data-dir", path.join(ws, ".tether")], other],
    ];
    for (const [what, args, cwd, env] of refusals) {
      const r = await serverOutcome(args, cwd, env);
      expect(r.listened, what).toBe(false);
      expect(r.code, what).toBe(2);
      expect(r.stderr, what).toMatch(
        /^tether server: The data dir .* is inside the local workspace /m,
      );
      expect(r.stderr, what).toContain("--data-dir");
      expect(r.stderr, what).not.toMatch(/\n\s+at /); // a message, not a stack trace
    }
    expect(await readdir(ws)).toEqual([]);
  }, 120_000);

  it("defaults to $XDG_DATA_HOME/tether, is 0700 with every file 0600, and workspace files keep the umask", async () => {
    const home = await tempDir();
    const ws = await tempDir();
    const env = { ...process.env, HOME: home, XDG_DATA_HOME: path.join(home, "xdg") };
    const server = await startServerProcess([], ws, (fn) => cleanups.push(fn), {
      env,
      umask: 0o022,
    });
    const data = path.join(home, "xdg", "tether");
    expect((await stat(path.join(data, "db"))).isDirectory()).toBe(true);
    expect(await readdir(ws)).toEqual([]); // nothing of the server in its workspace

    const out = await chat(
      server.url,
      home,
      "$ echo made > made.txt && mkdir made-dir && echo done",
    );
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("done");
    expect((await stat(path.join(ws, "made.txt"))).mode & 0o777).toBe(0o644);
    expect((await stat(path.join(ws, "made-dir"))).mode & 0o777).toBe(0o755);

    const exited = new Promise((r) => server.proc.once("exit", r));
    server.proc.kill("SIGTERM");
    await exited;
    const entries = await modes(data);
    expect(entries.map((e) => path.relative(data, e.path))).toEqual(
      expect.arrayContaining(["", "db", "secret.key", "local-agent.log"]),
    );
    expect(entries.filter((e) => e.mode !== (e.dir ? 0o700 : 0o600))).toEqual([]);
  }, 120_000);
});
