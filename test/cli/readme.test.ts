// The README's demo examples, run as written (`bin/tether chat '$ ls -la'`, `bin/tether chat
// 'read README.md'`): a real `bin/tether server` with the demo model on a workspace holding the
// README, the first `chat` creating the owner as the README says. Only the server's address is
// added (the test's server listens on a free port, not on 3000).

import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { savedFor } from "../../src/cli/config.ts";
import { api, BIN, startServerProcess, type ServerProcess } from "../support/server.ts";

const README = path.resolve(import.meta.dirname, "../../README.md");
const cleanups: (() => Promise<void>)[] = [];
let server: ServerProcess;
let home: string;
let workspace: string;

beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), "tether-readme-"));
  workspace = path.join(home, "checkout");
  await mkdir(workspace);
  await copyFile(README, path.join(workspace, "README.md"));
  server = await startServerProcess(
    ["--data-dir", path.join(home, "data"), "--workspace-dir", workspace],
    workspace,
    (fn) => void cleanups.push(fn),
  );
}, 60_000);

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rm(home, { recursive: true, force: true });
});

/** The `bin/tether chat ...` lines of the README's "In another terminal" block. */
async function demoExamples(): Promise<string[]> {
  const text = await readFile(README, "utf8");
  const at = text.indexOf("In another terminal:");
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
  return block
    .split("\n")
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l.startsWith("bin/tether chat "));
}

function sh(line: string): Promise<{ code: number | null; out: string }> {
  const command = line.replace(/^bin\/tether chat /, `"${BIN}" chat --server ${server.url} `);
  const proc = spawn("/bin/sh", ["-c", command], {
    cwd: workspace,
    env: { ...process.env, XDG_CONFIG_HOME: path.join(home, "config"), TETHER_TOKEN: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
  proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, out })));
}

it("the README's demo examples run as written with the demo model", async () => {
  const examples = await demoExamples();
  expect(examples).toEqual(["bin/tether chat '$ ls -la'", "bin/tether chat 'read README.md'"]);
  const ls = await sh(examples[0]!);
  expect(ls.code, ls.out).toBe(0);
  expect(ls.out).toContain("README.md");
  expect(ls.out).toMatch(/Exit code 0/);
  const read = await sh(examples[1]!);
  expect(read.code, read.out).toBe(0);
  expect(read.out).not.toContain("absolute path");
  expect(read.out).toContain(`Read ${path.join(workspace, "README.md")}:`);
  expect(read.out).toContain("First line: # Tether");

  // /compact on that chat: the demo model writes the summary, the list marks the boundary.
  const chatId = /chat ([0-9a-f-]{36})/.exec(read.out)![1]!;
  const token = savedFor(
    await readFile(path.join(home, "config", "tether", "cli-token"), "utf8"),
    new URL(server.url).origin,
  )!;
  expect(
    (
      await api<{ status: string }>(
        server.url,
        token,
        "POST",
        `/api/v1/chats/${chatId}/compact`,
        {},
      )
    ).status,
  ).toBe("running");
  let messages: { boundary?: boolean; parts: { type: string; summary?: string }[] }[] = [];
  for (let i = 0; i < 200 && !messages.some((m) => m.boundary); i++) {
    await new Promise((r) => setTimeout(r, 50));
    messages = (
      await api<{ messages: typeof messages }>(
        server.url,
        token,
        "GET",
        `/api/v1/chats/${chatId}/messages`,
      )
    ).messages;
  }
  const summary = messages.find((m) => m.boundary)!.parts[0]!.summary!;
  expect(summary).toContain("read README.md");
  expect(summary).toContain("read_file");
}, 120_000);
