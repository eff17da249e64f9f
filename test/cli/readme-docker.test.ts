// The README's "Quickstart: a chat on a Docker workspace", run as written: a real
// `bin/tether server` with the demo model, then the section's commands — the ones in its
// block (`templates push`, `workspaces create --wait`, `chat --workspace`) and those its text
// names (`workspaces stop`, `chat` again, `workspaces delete`) — from the checkout, with
// examples/templates/docker building its image, its container's agent dialling out. Only the
// server's address is added (the test's server listens on a free port, not on 3000). Skipped
// (with a message) without terraform or a Docker daemon.

import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, startServerProcess, type ServerProcess } from "../support/server.ts";
import {
  dockerAvailable,
  removeDockerWorkspaces,
  terraformAvailable,
  waitFor,
} from "../support/workspaces.ts";

const CHECKOUT = path.resolve(import.meta.dirname, "../..");
const README = path.join(CHECKOUT, "README.md");
const HAS_TERRAFORM = terraformAvailable();
const HAS_DOCKER = HAS_TERRAFORM && dockerAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the README's Docker quickstart test is skipped.");
else if (!HAS_DOCKER)
  console.warn(
    "No Docker daemon answers `docker info`: the README's Docker quickstart test is skipped.",
  );

/** The section's text, from its heading to the next one. */
async function section(): Promise<string> {
  const text = await readFile(README, "utf8");
  const at = text.indexOf("## Quickstart: a chat on a Docker workspace");
  expect(at).toBeGreaterThan(0);
  const end = text.indexOf("\n#", at + 1);
  return text.slice(at, end);
}

function docker(...args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const p = spawn("docker", args, { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    p.stdout.on("data", (c: Buffer) => (out += c.toString()));
    p.once("exit", () => resolve(out.trim()));
  });
}

describe.skipIf(!HAS_DOCKER)("README: a chat on a Docker workspace", () => {
  const cleanups: (() => Promise<void>)[] = [];
  let server: ServerProcess;
  let home: string;
  const made: string[] = [];

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), "tether-readme-docker-"));
    const workspace = path.join(home, "checkout");
    await mkdir(workspace);
    server = await startServerProcess(
      ["--data-dir", path.join(home, "data"), "--workspace-dir", workspace],
      workspace,
      (fn) => void cleanups.push(fn),
    );
  }, 60_000);
  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    removeDockerWorkspaces(made);
    await rm(home, { recursive: true, force: true });
  }, 60_000);

  /** A README line (`bin/tether …`) run from the checkout, with this server's address. */
  function sh(line: string): Promise<{ code: number | null; out: string; err: string }> {
    const command = `${line.replace(/^bin\/tether /, `"${BIN}" `)} --server ${server.url}`;
    const proc = spawn("/bin/sh", ["-c", command], {
      cwd: CHECKOUT,
      env: { ...process.env, XDG_CONFIG_HOME: path.join(home, "config"), TETHER_TOKEN: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr.on("data", (c: Buffer) => (err += c.toString()));
    return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, out, err })));
  }

  it("its commands take a new user from the server to a chat in a container, then stop, restart and delete it", async () => {
    const text = await section();
    const block = /```sh\n([\s\S]*?)```/
      .exec(text)![1]!
      .split("\n")
      .map((l) => l.replace(/\s+#.*$/, "").trim())
      .filter((l) => l !== "");
    expect(block).toEqual([
      "bin/tether server",
      "bin/tether templates push examples/templates/docker --name docker",
      "bin/tether workspaces create box --template docker --wait",
      "bin/tether chat --workspace box '$ echo hello > note.txt && pwd'",
    ]);
    const named = [...text.matchAll(/`(bin\/tether [^`]+)`/g)].map((m) => m[1]!);
    expect(named).toEqual([
      "bin/tether workspaces stop box",
      "bin/tether chat --workspace box '$ cat note.txt'",
      "bin/tether workspaces delete box",
    ]);

    const push = await sh(block[1]!);
    expect(push.code, push.err).toBe(0);
    expect(push.out).toMatch(/^created template docker \(.+\), version 1\n$/);
    expect(push.err).toContain("Created the first user admin@localhost (the owner)");

    const create = await sh(block[2]!);
    expect(create.code, create.err).toBe(0);
    const created = /^box \(([0-9a-f-]{36})\): running, agent connected, stops \S+ if idle\n$/.exec(
      create.out,
    );
    expect(created, create.out).not.toBeNull();
    const id = created![1]!;
    made.push(id);

    const chat = await sh(block[3]!);
    expect(chat.code, chat.err).toBe(0);
    expect(chat.out).toContain("▶ $ echo hello > note.txt && pwd\n  /home/workspace\n  exit 0\n");
    expect(chat.out).toContain("Exit code 0, 16 bytes of output. First line: /home/workspace");
    expect(chat.err).toMatch(/^chat [0-9a-f-]{36}$/m);

    const stop = await sh(named[0]!);
    expect(stop.code, stop.err).toBe(0);
    expect(stop.out).toMatch(/^box \(.+\): stopping/);
    await waitFor(
      "`workspaces list` to show it stopped",
      async () => (await sh("bin/tether workspaces list")).out.includes(`box (${id}): stopped\n`),
      60_000,
    );
    expect(await docker("ps", "-a", "-q", "--filter", `name=^tether-ws-${id}$`)).toBe("");

    const again = await sh(named[1]!);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain("▶ $ cat note.txt\n  hello\n  exit 0\n");

    const del = await sh(named[2]!);
    expect(del.code, del.err).toBe(0);
    expect(del.out).toMatch(/^box \(.+\): deleting/);
    await waitFor(
      "the workspace to leave the list",
      async () => !(await sh("bin/tether workspaces list")).out.includes(id),
      60_000,
    );
    expect(await docker("ps", "-a", "-q", "--filter", `name=^tether-ws-${id}$`)).toBe("");
    expect(await docker("volume", "ls", "-q", "--filter", `name=^tether-home-${id}$`)).toBe("");

    // The template is listed for admins, its workspace gone.
    const list = await sh("bin/tether templates list");
    expect(list.code, list.err).toBe(0);
    expect(list.out).toMatch(/^NAME +VERSION +TTL +WORKSPACES +ID/);
    expect(list.out).toMatch(/\ndocker +1 +60m +0 +[0-9a-f-]{36}\n$/);
  }, 300_000);
});
