// `bin/tether server` and `bin/tether chat` as a person runs them: real processes, the
// embedded database, a local workspace agent, real HTTP.

import { randomInt } from "node:crypto";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { savedFor } from "../../src/cli/config.ts";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { alive, api, BIN, startServerProcess } from "../support/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-server-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

/** The CLI's environment in a test: its config dir (the saved token) is the test's `cwd/config`. */
const cliEnv = (cwd: string) => ({ ...process.env, XDG_CONFIG_HOME: path.join(cwd, "config") });

function run(
  args: string[],
  cwd: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(BIN, args, { cwd, env: cliEnv(cwd), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, stdout, stderr })));
}

/** A running `bin/tether` command: its output so far, and its exit. */
function start(args: string[], cwd: string) {
  const proc = spawn(BIN, args, { cwd, env: cliEnv(cwd), stdio: ["ignore", "pipe", "pipe"] });
  cleanups.push(() => void proc.kill("SIGKILL"));
  const out = { stdout: "", stderr: "" };
  proc.stdout.on("data", (c: Buffer) => (out.stdout += c.toString()));
  proc.stderr.on("data", (c: Buffer) => (out.stderr += c.toString()));
  const exit = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  return { proc, out, exit };
}

async function waitFor(what: string, cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not in ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function chatIdOf(stderr: string): string {
  return /^chat (\S+)$/m.exec(stderr)![1]!;
}

/** The token `tether chat` saved for `server` (its line in the token file). */
function savedToken(home: string, server: string): string {
  const text = readFileSync(path.join(home, "config", "tether", "cli-token"), "utf8");
  return savedFor(text, new URL(server).origin)!;
}

function sleepRunning(duration: string): boolean {
  return spawnSync("pgrep", ["-f", `sleep ${duration}`]).status === 0;
}

const startServer = (args: string[], cwd: string) =>
  startServerProcess(args, cwd, (fn) => cleanups.push(fn));

describe("bin/tether server", () => {
  it("runs on the embedded database with the demo model and a local workspace; bin/tether chat drives it", async () => {
    const home = await tempDir();
    const ws = await tempDir();
    const server = await startServer(
      ["--data-dir", path.join(home, "data"), "--workspace-dir", ws],
      home,
    );
    const health = await fetch(new URL("/api/v1/health", server.url));
    expect(health.status).toBe(200);
    const chat = await run(["chat", "--server", server.url, "$ echo hello-from-tether"], home);
    expect(chat.stderr).not.toMatch(/error/i);
    expect(chat.code).toBe(0);
    expect(chat.stdout).toContain("hello-from-tether");
    expect(chat.stdout).toMatch(/exit 0/);
    // The owner's token went to the user's config dir (0700, the file 0600), not the current
    // directory; the message says where, and how to set a password, but never the password.
    const config = path.join(home, "config", "tether");
    expect(statSync(config).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(config, "cli-token")).mode & 0o777).toBe(0o600);
    expect(chat.stderr).toContain(path.join(config, "cli-token"));
    expect(chat.stderr).toContain("/api/v1/me/password");
    const password = savedFor(
      readFileSync(path.join(config, "initial-password"), "utf8"),
      new URL(server.url).origin,
    )!;
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(chat.stderr + chat.stdout).not.toContain(password);
    expect(existsSync(path.join(home, ".tether"))).toBe(false);
    const me = await api<{ email: string }>(
      server.url,
      savedToken(home, server.url),
      "GET",
      "/api/v1/me",
    );
    expect(me.email).toBe("admin@localhost");
    const agent = JSON.parse(
      await readFile(path.join(home, "data", "local-agent.json"), "utf8"),
    ) as { pid: number };
    expect(alive(agent.pid)).toBe(true);
    const exited = new Promise<number | null>((r) => server.proc.once("exit", (c) => r(c)));
    server.proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    const end = Date.now() + 5_000;
    while (alive(agent.pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(alive(agent.pid)).toBe(false);
  }, 90_000);

  it("a SIGTERM while its first start runs stops it once started: exit 0, agent stopped, data dir usable", async () => {
    const home = await tempDir();
    const ws = await tempDir();
    const data = path.join(home, "data");
    const first = start(
      ["server", "--listen", "127.0.0.1:0", "--data-dir", data, "--workspace-dir", ws],
      home,
    );
    // The data dir appears as the start begins; initdb and the agent's start follow.
    await waitFor("the data dir", () => existsSync(data), 30_000);
    first.proc.kill("SIGTERM");
    expect(await first.exit).toBe(0);
    const agentFile = path.join(data, "local-agent.json");
    if (existsSync(agentFile)) {
      const { pid } = JSON.parse(readFileSync(agentFile, "utf8")) as { pid: number };
      await waitFor("the local agent to stop", () => !alive(pid), 5_000);
    }
    const again = await startServer(["--data-dir", data, "--workspace-dir", ws], home);
    expect((await fetch(new URL("/api/v1/health", again.url))).status).toBe(200);
  }, 120_000);

  it("after SIGKILL of its process group mid-execute, a restart resumes the chat: one process, one result", async () => {
    const fake: FakeProvider = await startFakeProvider();
    cleanups.push(() => fake.close());
    const home = await tempDir();
    const ws = await tempDir();
    const marker = path.join(ws, "marker.txt");
    const args = [
      "--data-dir",
      path.join(home, "data"),
      "--workspace-dir",
      ws,
      "--model",
      "openai-compatible:fake-model",
      "--model-base-url",
      fake.url,
    ];
    fake.script(
      {
        toolCalls: [
          {
            id: "call_1",
            name: "execute",
            args: { command: `echo line >> ${marker}; sleep 2; echo done`, timeout: "20s" },
          },
        ],
      },
      { text: "finished" },
    );
    const first = await startServer(args, home);
    const { token } = await api<{ token: string }>(
      first.url,
      undefined,
      "POST",
      "/api/v1/users/first",
      { email: "a@b.c", password: "correct horse battery" },
    );
    const chat = await api<{ id: string }>(first.url, token, "POST", "/api/v1/chats", {
      message: "go",
    });
    const end = Date.now() + 20_000;
    while ((await readFile(marker, "utf8").catch(() => "")) === "" && Date.now() < end)
      await new Promise((r) => setTimeout(r, 50));
    const agentBefore = JSON.parse(
      await readFile(path.join(home, "data", "local-agent.json"), "utf8"),
    ) as { pid: number };
    process.kill(-first.proc.pid!, "SIGKILL");
    await new Promise((r) => first.proc.once("exit", r));
    expect(alive(agentBefore.pid)).toBe(true); // its own process group survived

    const second = await startServer(args, home);
    const agentAfter = JSON.parse(
      await readFile(path.join(home, "data", "local-agent.json"), "utf8"),
    ) as { pid: number };
    expect(agentAfter.pid).toBe(agentBefore.pid); // re-adopted, not replaced
    let status = "";
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      status = (await api<{ status: string }>(second.url, token, "GET", `/api/v1/chats/${chat.id}`))
        .status;
      if (status === "waiting" || status === "error") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe("waiting");
    expect(await readFile(marker, "utf8")).toBe("line\n");
    const { messages } = await api<{
      messages: {
        role: string;
        parts: { type: string; result?: { status: string; output?: string } }[];
      }[];
    }>(second.url, token, "GET", `/api/v1/chats/${chat.id}/messages`);
    const toolResults = messages.flatMap((m) => m.parts.filter((p) => p.type === "tool-result"));
    expect(toolResults).toHaveLength(1);
    expect(toolResults[0]!.result).toMatchObject({ status: "completed", output: "done\n" });
    second.proc.kill("SIGTERM");
    await new Promise((r) => second.proc.once("exit", r));
  }, 90_000);

  it("bin/tether chat: Ctrl-C interrupts and shows how each call ended; a second Ctrl-C exits", async () => {
    const home = await tempDir();
    const ws = await tempDir();
    const server = await startServer(
      ["--data-dir", path.join(home, "data"), "--workspace-dir", ws],
      home,
    );
    const d = `30.${randomInt(100_000, 999_999)}`;
    const chat = start(
      ["chat", "--server", server.url, `$ echo early; sleep ${d}; echo late`],
      home,
    );
    await waitFor(
      "the call is shown and running",
      () => sleepRunning(d) && chat.out.stdout.includes("▶ $ echo early"),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 300)); // let "early" reach the agent's output
    chat.proc.kill("SIGINT");
    expect(await chat.exit).toBe(0); // it stays for the results, then leaves as the chat waits
    expect(chat.out.stderr).toContain("Interrupting… (Ctrl-C again to exit)");
    // The output (live, as it came), then how the call ended.
    expect(chat.out.stdout).toMatch(
      /\n {2}early\n {2}canceled — Canceled by the user after \d+\.\d s/,
    );
    expect(chat.out.stdout).not.toMatch(/^ {2}late$/m);
    expect(sleepRunning(d)).toBe(false);

    // A second Ctrl-C while the interrupt is still in progress (the agent is stopped, so the
    // cancel waits) leaves at once; the interrupt carries on without the terminal.
    const d2 = `30.${randomInt(100_000, 999_999)}`;
    const impatient = start(["chat", "--server", server.url, `$ sleep ${d2}`], home);
    await waitFor(
      "the second command runs",
      () => sleepRunning(d2) && /^chat /m.test(impatient.out.stderr),
      20_000,
    );
    const agent = JSON.parse(
      await readFile(path.join(home, "data", "local-agent.json"), "utf8"),
    ) as { pid: number };
    process.kill(agent.pid, "SIGSTOP");
    cleanups.push(() => void process.kill(agent.pid, "SIGCONT"));
    impatient.proc.kill("SIGINT");
    await waitFor(
      "the first Ctrl-C is taken",
      () => impatient.out.stderr.includes("Interrupting"),
      5_000,
    );
    impatient.proc.kill("SIGINT");
    expect(await impatient.exit).toBe(130);
    const status = async () =>
      (
        await api<{ status: string }>(
          server.url,
          savedToken(home, server.url),
          "GET",
          `/api/v1/chats/${chatIdOf(impatient.out.stderr)}`,
        )
      ).status;
    expect(await status()).toBe("interrupting");
    process.kill(agent.pid, "SIGCONT");
    await waitFor("the command is stopped", () => !sleepRunning(d2), 10_000);
  }, 90_000);
});
