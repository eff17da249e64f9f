// `bin/tether chat` as people and scripts run it, against a real `bin/tether server` with the
// demo model: under a real pseudo-terminal with a window size (Ctrl-C interrupts a running
// command, which is killed and shown canceled; a spinner), under one without a size (as under
// `script`: no spinner, the answer prints), in a pipe (no spinner lines, no escape sequences),
// with --json, an interactive session, and the one-line errors of a server that is down, a
// missing token and a refused one.

import { randomInt } from "node:crypto";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  BIN,
  chatReaches,
  seedEmbeddedDatabase,
  startServerProcess,
  type ServerProcess,
  workspaceIn,
} from "../support/server.ts";
import { runInPty, type PtyProcess } from "./pty.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const afterAllCleanups: (() => Promise<void> | void)[] = [];

let server: ServerProcess;
let home: string;
let token: string;

beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), "tether-cli-"));
  await seedEmbeddedDatabase(path.join(home, "data"));
  server = await startServerProcess(
    ["--data-dir", path.join(home, "data"), "--workspace-dir", await workspaceIn(home)],
    home,
    (fn) => afterAllCleanups.push(fn),
  );
  token = (
    await api<{ token: string }>(server.url, undefined, "POST", "/api/v1/users/first", {
      email: "cli@example.com",
      password: "correct horse battery",
    })
  ).token;
  return async () => {
    for (const c of afterAllCleanups.splice(0).reverse()) await c();
    await rm(home, { recursive: true, force: true });
  };
}, 60_000);

/** The environment of a `tether chat` run: the test's token, and no saved one to find. */
const chatEnv = () => ({ TETHER_TOKEN: token, XDG_CONFIG_HOME: path.join(home, "config") });

function pty(args: string[], size: { rows: number; cols: number }): PtyProcess {
  const p = runInPty([BIN, "chat", "--server", server.url, ...args], {
    ...size,
    cwd: home,
    // CI set, as on most CI machines: the spinner must not fall back to printed "- label" lines.
    env: { ...chatEnv(), CI: "1" },
  });
  cleanups.push(() => p.kill());
  return p;
}

function run(
  args: string[],
  env: Record<string, string> = chatEnv(),
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(BIN, ["chat", ...args], {
    cwd: home,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => void proc.kill("SIGKILL"));
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, stdout, stderr })));
}

const sleepRunning = (d: string) => spawnSync("pgrep", ["-f", `sleep ${d}`]).status === 0;
/** A sleep no other test runs, so pgrep finds only ours. */
const uniqueSleep = () => `30.${randomInt(100_000, 999_999)}`;
const chatIdIn = (out: string) => /--chat ([0-9a-f-]{36})/.exec(out)?.[1];

async function toolResults(chatId: string): Promise<Record<string, unknown>[]> {
  const { messages } = await api<{
    messages: { parts: { type: string; result?: Record<string, unknown> }[] }[];
  }>(server.url, token, "GET", `/api/v1/chats/${chatId}/messages`);
  return messages
    .flatMap((m) => m.parts.filter((p) => p.type === "tool-result"))
    .map((p) => p.result!);
}

describe("tether chat", () => {
  it("on a terminal with a size, Ctrl-C interrupts a running command: it is killed and its result is canceled", async () => {
    const d = uniqueSleep();
    const chat = pty([`$ echo early; sleep ${d}; echo late`], { rows: 24, cols: 80 });
    // The command's output shows while it runs.
    await chat.waitFor("the live output", (o) => /^ {2}early$/m.test(o) && sleepRunning(d));
    chat.type("\x03");
    expect(await chat.exit).toBe(0);
    const out = chat.screen();
    expect(out).toContain("Interrupting… (Ctrl-C again to exit)");
    expect(out).toMatch(/ {2}canceled — Canceled by the user after \d+\.\d s/);
    expect(out).not.toMatch(/^ {2}late/m);
    expect(sleepRunning(d)).toBe(false);
    // A spinner ran (its label), and stopping it overwrote no text: every line reads whole.
    expect(chat.output()).toContain("running execute…");
    expect(out).toMatch(/^Running `echo early; sleep [\d.]+; echo late`\.\n▶ \$ echo early/m);
    const id = chatIdIn(out)!;
    expect(out).toContain(`Resume with: tether chat --server ${server.url} --chat ${id}`);
    expect((await toolResults(id))[0]).toMatchObject({ status: "canceled", output: "early\n" });
  }, 60_000);

  it("a second Ctrl-C during the interrupt leaves at once (exit 130); the interrupt still happens", async () => {
    const d = uniqueSleep();
    // A process of another session holds the output open, so the killed command's result waits
    // for the agent's exit grace (250 ms): the interrupt is still under way at the second Ctrl-C
    // (without it, an interrupt can end within the screen's polling interval, and the client with
    // exit 0 before the second Ctrl-C is typed).
    const chat = pty([`$ echo early; setsid sleep 2 & sleep ${d}`], { rows: 24, cols: 80 });
    await chat.waitFor("the live output", (o) => /^ {2}early$/m.test(o) && sleepRunning(d));
    chat.type("\x03");
    await chat.waitFor("the interrupt", (o) => o.includes("Interrupting… (Ctrl-C again to exit)"));
    chat.type("\x03");
    expect(await chat.exit).toBe(130);
    const out = chat.screen();
    const id = chatIdIn(out)!;
    expect(out).toContain(`Resume with: tether chat --server ${server.url} --chat ${id}`);
    await chatReaches(server.url, token, id, "waiting");
    expect(sleepRunning(d)).toBe(false);
    expect((await toolResults(id))[0]).toMatchObject({ status: "canceled", output: "early\n" });
  }, 60_000);

  it("on a terminal without a size (0×0) it runs no spinner, finishes and prints the answer", async () => {
    const chat = pty(["$ echo no-size; sleep 1; echo done"], { rows: 0, cols: 0 });
    expect(await chat.exit).toBe(0);
    const out = chat.screen();
    expect(out).toMatch(/^ {2}no-size\n {2}done\n {2}exit 0$/m);
    expect(out).toContain("Exit code 0"); // the demo model's answer
    expect(chat.output()).not.toContain("running execute…");
    expect(chat.output().length).toBeLessThan(4_000);
  }, 60_000);

  it("on a terminal a command's output keeps its colours and no other escape sequence; the command shows its own", async () => {
    // The output (live: the command goes on for a second) sets the window title, the clipboard
    // (OSC 52), moves the cursor up and conceals what follows; the command itself holds an OSC
    // in a comment.
    const chat = pty(
      [
        "$ printf '\\033]0;title\\007\\033]52;c;cHduZWQ=\\007\\033[31mred\\033[0m\\033[2A\\033[8mhidden\\n'; sleep 1 #\x1b]0;pwned\x07",
      ],
      { rows: 24, cols: 80 },
    );
    expect(await chat.exit).toBe(0);
    const raw = chat.output();
    expect(raw).toContain("\x1b[31mred\x1b[0m");
    expect(raw).not.toContain("\x1b]"); // no OSC, from the output or from the command
    expect(raw).not.toContain("\x1b[2A");
    // Concealed output does not conceal what the client prints next.
    const between = raw.slice(raw.indexOf("hidden"), raw.indexOf("exit 0"));
    expect(between).toContain("\x1b[0m");
    expect(chat.screen()).toMatch(/^▶ \$ printf .* #\\x1b\]0;pwned\\x07$/m);
  }, 60_000);

  it("in a pipe it prints no spinner lines and no escape sequences; the chat and how to resume go to stderr", async () => {
    const r = await run(["--server", server.url, `$ echo piped; printf '\\033[31mred\\033[0m\\n'`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^▶ \$ echo piped.*\n {2}piped\n {2}red\n {2}exit 0\n/m);
    const both = r.stdout + r.stderr;
    expect(both).not.toContain("\x1b"); // no escape sequence
    expect(both).not.toMatch(/\r|working|thinking|running execute/);
    expect(r.stderr).toMatch(/^chat [0-9a-f-]{36}\n/);
    expect(r.stderr).toMatch(/^Resume with: tether chat --server \S+ --chat [0-9a-f-]{36}$/m);
  }, 60_000);

  it("an output longer than the agent keeps shows live to its end, each line once", async () => {
    // 600 lines of 100 bytes in twelve bursts: past 32 KiB the agent keeps a head and a tail,
    // and the reads after that are no longer extensions of what was shown. A burst is 5 KB, so
    // a read can come late by three bursts and still find where the last one left off.
    const x = "x".repeat(88);
    const r = await run([
      "--server",
      server.url,
      `$ for b in $(seq 0 11); do seq -f "line %03g ${x}" $((b*50+1)) $((b*50+50)); sleep 0.5; done`,
    ]);
    expect(r.code).toBe(0);
    const shown = [...r.stdout.matchAll(/^ {2}line (\d{3}) x+$/gm)].map((m) => Number(m[1]));
    expect(shown).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
  }, 60_000);

  it("--json prints the chat, every stream event, the live output and the end as JSON lines", async () => {
    const r = await run(["--server", server.url, "--json", "$ echo one; sleep 1.5; echo two"]);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; data: Record<string, unknown> });
    expect(lines[0]).toEqual({ event: "chat", data: { id: expect.any(String) } });
    expect(lines.at(-1)).toEqual({
      event: "end",
      data: { chat_id: lines[0]!.data.id, status: "waiting" },
    });
    const events = new Set(lines.map((l) => l.event));
    expect([...events]).toEqual(expect.arrayContaining(["message", "part", "status", "output"]));
    // The stream the create answered with goes on after our own message: once the chat, then
    // the answer's messages only.
    expect(lines.filter((l) => l.event === "chat")).toHaveLength(1);
    const roles = lines.filter((l) => l.event === "message").map((l) => l.data.role);
    expect(roles).toEqual(["assistant", "tool", "assistant"]);
    const output = lines.filter((l) => l.event === "output").map((l) => l.data.text as string);
    expect(output.join("")).toMatch(/^one\n/); // read while the command ran
  }, 60_000);

  it("an interactive session: a message, /help, /compact, Ctrl-C interrupts the running turn, Ctrl-C at the prompt leaves; Ctrl-D leaves too", async () => {
    const session = pty([], { rows: 24, cols: 80 });
    await session.waitFor("the prompt", (o) => o.includes("> "));
    session.type("$ echo first-message\r");
    await session.waitFor("the first answer", (o) => /First line: first-message/.test(o));
    await session.waitFor("the prompt again", (o) => /> [^\n]*$/.test(o));
    session.type("/help\r");
    await session.waitFor("the help", (o) => o.includes("/compact"));
    // /compact folds the history so far: the demo model's summary, then the prompt again.
    session.type("/compact\r");
    await session.waitFor("the compaction", (o) =>
      /^── compacted \d+ messages; the model continues from this summary:\nSummary \(demo model\)/m.test(
        o,
      ),
    );
    await session.waitFor("the prompt after /compact", (o) => /> [^\n]*$/.test(o));
    const d = uniqueSleep();
    session.type(`$ echo second; sleep ${d}\r`);
    await session.waitFor(
      "the second command runs",
      (o) => /^ {2}second/m.test(o) && sleepRunning(d),
    );
    session.type("\x03");
    await session.waitFor("canceled", (o) => / {2}canceled — Canceled by the user/.test(o));
    expect(sleepRunning(d)).toBe(false);
    await session.waitFor("the prompt after the interrupt", (o) => /> [^\n]*$/.test(o));
    session.type("\x03");
    expect(await session.exit).toBe(0);
    const id = chatIdIn(session.screen())!;
    expect(id).toBeDefined();
    // Both messages went to the one chat.
    expect((await toolResults(id)).map((r) => r.status)).toEqual(["completed", "canceled"]);

    const again = pty(["--chat", id], { rows: 24, cols: 80 });
    await again.waitFor("the prompt", (o) => o.includes(`chat ${id}`) && o.includes("> "));
    again.type("\x04");
    expect(await again.exit).toBe(0);
    expect(again.screen()).toContain(`--chat ${id}`);
  }, 90_000);

  it("a server that is down, a missing token and a refused token are one line each and exit 1", async () => {
    const closed = `http://127.0.0.1:${await closedPort()}`;
    const noUsersYet = { XDG_CONFIG_HOME: path.join(home, "config") };
    const down = await run(["--server", closed, "--token", "x", "hello"]);
    const missing = await run(["--server", server.url, "hello"], noUsersYet);
    const refused = await run(["--server", server.url, "--token", "not-a-token", "hello"]);
    for (const [r, what] of [
      [
        down,
        /^tether chat: Cannot reach the server at http:\/\/127\.0\.0\.1:\d+ \(connection refused\)\. Is `tether server` running\?/,
      ],
      [missing, /^tether chat: This server has users: pass --token TOKEN or set TETHER_TOKEN\./],
      [refused, /^tether chat: The server refused the token \(401\)/],
    ] as const) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(what);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stdout).toBe("");
    }
  }, 60_000);

  it("a token saved for one server is not sent to another", async () => {
    // A server that has users: it records what each request carried.
    const seen: string[] = [];
    const other = createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? "-"}`);
      const first = req.method === "POST" && req.url === "/api/v1/users/first";
      res.writeHead(first ? 409 : 401, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: first ? "users_exist" : "unauthorized", message: "no" }));
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => new Promise<void>((r) => other.close(() => r())));
    const url = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
    const config = await mkdtemp(path.join(os.tmpdir(), "tether-cli-config-"));
    cleanups.push(() => rm(config, { recursive: true, force: true }));
    await mkdir(path.join(config, "tether"), { mode: 0o700 });
    // The saved token is this test's real server's, on its line.
    await writeFile(
      path.join(config, "tether", "cli-token"),
      `${new URL(server.url).origin} ${token}\n`,
      {
        mode: 0o600,
      },
    );
    const r = await run(["--server", url, "hello"], { XDG_CONFIG_HOME: config, TETHER_TOKEN: "" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/This server has users: pass --token TOKEN or set TETHER_TOKEN\./);
    expect(seen).toEqual(["POST /api/v1/users/first -"]);
    // And the server it was saved for still gets it.
    const own = await run(["--server", server.url, "$ echo mine"], {
      XDG_CONFIG_HOME: config,
      TETHER_TOKEN: "",
    });
    expect(own.code, own.stderr).toBe(0);
    expect(own.stdout).toContain("mine");
  }, 60_000);
});

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const net = await import("node:net");
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}
