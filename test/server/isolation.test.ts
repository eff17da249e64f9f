// Keys never enter a workspace: `bin/tether server` started with provider keys, cloud
// credentials, a database URL and TETHER_* secrets in its environment runs `$ env` through the
// demo model in its local workspace, and none of them is in the output; the local agent's
// token reaches it by environment, never on its command line.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { generateSecretKey } from "../../src/chatd/secrets/index.ts";
import { CHILD_ENV_ALLOWLIST } from "../../src/workspaces/child-env.ts";
import { createScratchDatabase, testDatabaseUrl } from "../support/db.ts";
import { BIN, startServerProcess } from "../support/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-isolation-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

const secret = (what: string) => `${what}-${randomBytes(8).toString("hex")}`;

/** `bin/tether chat MESSAGE` with its own config dir; resolves with its output. */
function chat(server: string, cwd: string, message: string) {
  const proc = spawn(BIN, ["chat", "--server", server, message], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: path.join(cwd, "config") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    proc.once("exit", (code) => resolve({ code, stdout, stderr })),
  );
}

const nulSplit = (text: string) => text.split("\0").filter((s) => s !== "");

async function processOf(pid: number) {
  const cmdline = nulSplit(await readFile(`/proc/${pid}/cmdline`, "utf8"));
  const environ = Object.fromEntries(
    nulSplit(await readFile(`/proc/${pid}/environ`, "utf8")).map((kv) => {
      const i = kv.indexOf("=");
      return [kv.slice(0, i), kv.slice(i + 1)];
    }),
  );
  return { cmdline, environ };
}

/** The server's secrets, as an operator would set them. */
function secretEnv() {
  return {
    ANTHROPIC_API_KEY: secret("sk-ant"),
    OPENAI_API_KEY: secret("sk-openai"),
    AWS_ACCESS_KEY_ID: secret("AKIA"),
    AWS_SECRET_ACCESS_KEY: secret("aws-secret"),
    TETHER_MODEL_API_KEY: secret("tether-model-key"),
    TETHER_TOKEN: secret("tether-token"),
    DATABASE_URL: `postgres://app:${secret("db-password")}@127.0.0.1:1/app`,
    TETHER_SECRET_KEY: generateSecretKey(),
  };
}

async function runEnvInWorkspace(o: {
  env: Record<string, string>;
  args: string[];
  home: string;
  ws: string;
}): Promise<void> {
  const server = await startServerProcess(
    ["--workspace-dir", o.ws, "--model", "demo", ...o.args],
    o.home,
    (fn) => cleanups.push(fn),
    { env: { ...process.env, ...o.env } },
  );
  const serverProc = await processOf(server.proc.pid!);
  const dataDir = path.join(o.home, "data");
  const agentPid = (
    JSON.parse(await readFile(path.join(dataDir, "local-agent.json"), "utf8")) as { pid: number }
  ).pid;
  const agent = await processOf(agentPid);

  // The token reaches the agent by environment, never on a command line.
  const token = agent.environ.TETHER_AGENT_TOKEN;
  expect(token).toMatch(/^[A-Za-z0-9_-]{20,}$/);
  expect(agent.cmdline).not.toContain("--token");
  expect(agent.cmdline.join(" ")).not.toContain(token!);
  expect(await readFile(path.join(dataDir, "local-agent.json"), "utf8")).not.toContain(token!);
  // The agent's whole environment is the allowlist and its token (and the PWD of the shell
  // that sets its umask).
  const allowed = new Set<string>([...CHILD_ENV_ALLOWLIST, "TETHER_AGENT_TOKEN", "PWD"]);
  expect(Object.keys(agent.environ).filter((k) => !allowed.has(k) && !k.startsWith("LC_"))).toEqual(
    [],
  );
  // Nor is a secret on the server's command line.
  for (const v of Object.values(o.env)) expect(serverProc.cmdline.join(" ")).not.toContain(v);

  const out = await chat(server.url, o.home, "$ env");
  expect(out.code).toBe(0);
  expect(out.stdout).toMatch(/exit 0/);
  expect(out.stdout).toContain(`PWD=${o.ws}`); // it is the command's environment
  for (const [name, value] of Object.entries(o.env)) {
    expect(out.stdout, name).not.toContain(value);
    expect(out.stdout, name).not.toMatch(new RegExp(`^ *${name}=`, "m"));
  }
  expect(out.stdout).not.toContain(token!);
  expect(out.stdout).not.toMatch(/^ *TETHER_/m);
}

describe("keys never enter a workspace", () => {
  it("the local agent and the commands it runs see none of the server's keys, and its token is not on its command line", async () => {
    const home = await tempDir();
    const ws = await tempDir();
    await runEnvInWorkspace({
      env: secretEnv(),
      args: ["--data-dir", path.join(home, "data")],
      home,
      ws,
    });
  }, 120_000);

  describe.skipIf(!testDatabaseUrl())("on Postgres", () => {
    it("TETHER_POSTGRES_URL stands for --postgres-url, and neither it nor the secret key reaches a command", async () => {
      const scratch = await createScratchDatabase(testDatabaseUrl()!, "tether_isolation");
      cleanups.push(() => scratch.drop());
      const url = new URL(scratch.url);
      url.searchParams.set("application_name", secret("url-marker"));
      const home = await tempDir();
      const ws = await tempDir();
      await runEnvInWorkspace({
        env: { ...secretEnv(), TETHER_POSTGRES_URL: url.toString() },
        args: ["--data-dir", path.join(home, "data")],
        home,
        ws,
      });
      // It ran on that database, not on an embedded one.
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      const users = await c.query<{ n: number }>("SELECT count(*)::int AS n FROM users");
      await c.end();
      expect(users.rows[0]!.n).toBe(1);
    }, 120_000);
  });
});
