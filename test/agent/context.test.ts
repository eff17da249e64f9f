// GET /api/v0/context (an extension of the contract, docs/contract.md): the workspace's
// environment and instruction files, with their caps. Run again over the dial-out connection
// (dialout-contract.test.ts).

import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  CONTEXT_FILE_MAX_BYTES,
  CONTEXT_TOTAL_MAX_BYTES,
  readContext,
} from "../../src/agent/context.ts";
import { useAgents } from "../support/agent.ts";

const startAgent = useAgents();

describe("the context route", () => {
  it("reports the directory, OS, shell, date and git branch, and the instruction files in order", async () => {
    const agent = await startAgent();
    await writeFile(path.join(agent.dir, "AGENTS.md"), "Run `make test` before you commit.\n");
    await writeFile(path.join(agent.dir, ".cursorrules"), "Tabs, not spaces.\n");
    await mkdir(path.join(agent.dir, ".git"));
    await writeFile(path.join(agent.dir, ".git", "HEAD"), "ref: refs/heads/feature/x\n");
    const c = await agent.client.context();
    expect(c).toMatchObject({
      directory: agent.dir,
      os: process.platform,
      arch: process.arch,
      shell: expect.stringMatching(/^sh/),
      date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
      git: { branch: "feature/x" },
      limits: { file_bytes: CONTEXT_FILE_MAX_BYTES, total_bytes: CONTEXT_TOTAL_MAX_BYTES },
    });
    expect(c.files.map((f) => path.basename(f.path))).toEqual(["AGENTS.md", ".cursorrules"]);
    expect(c.files[0]).toEqual({
      path: path.join(agent.dir, "AGENTS.md"),
      bytes: 35,
      truncated: false,
      content: "Run `make test` before you commit.\n",
    });
  });

  it("a file above the per-file cap is cut to it, and the total cap bounds all files together", async () => {
    const agent = await startAgent();
    const big = "é".repeat(CONTEXT_FILE_MAX_BYTES); // two bytes a character: twice the cap
    await writeFile(path.join(agent.dir, "AGENTS.md"), big);
    await writeFile(path.join(agent.dir, "CLAUDE.md"), `a${big}`); // the cap falls inside an é
    await writeFile(path.join(agent.dir, ".cursorrules"), "small\n");
    const c = await agent.client.context();
    expect(c.git).toBeNull();
    const [agents, claude, rules] = c.files;
    expect(agents).toMatchObject({ bytes: CONTEXT_FILE_MAX_BYTES * 2, truncated: true });
    expect(Buffer.byteLength(agents!.content)).toBe(CONTEXT_FILE_MAX_BYTES);
    expect(agents!.content).toBe("é".repeat(CONTEXT_FILE_MAX_BYTES / 2));
    expect(claude).toMatchObject({ truncated: true });
    expect(Buffer.byteLength(claude!.content)).toBe(CONTEXT_FILE_MAX_BYTES - 1);
    expect(claude!.content).toBe(`a${"é".repeat(CONTEXT_FILE_MAX_BYTES / 2 - 1)}`);
    // The first two leave one byte of the total cap: the third file gets that byte.
    expect(rules).toMatchObject({ bytes: 6, truncated: true, content: "s" });
    const total = c.files.reduce((n, f) => n + Buffer.byteLength(f.content), 0);
    expect(total).toBeLessThanOrEqual(CONTEXT_TOTAL_MAX_BYTES);
  });

  it("only regular files are read: a FIFO or a device in a file's place is skipped, not waited on", async () => {
    const agent = await startAgent();
    // Opening a FIFO to read waits for a writer, and so would the context's answer.
    execFileSync("mkfifo", [path.join(agent.dir, "AGENTS.md")]);
    await writeFile(path.join(agent.dir, "rules.txt"), "Tabs.\n");
    await symlink(path.join(agent.dir, "rules.txt"), path.join(agent.dir, "CLAUDE.md"));
    await symlink("/dev/zero", path.join(agent.dir, ".cursorrules"));
    await mkdir(path.join(agent.dir, ".git"));
    execFileSync("mkfifo", [path.join(agent.dir, ".git", "HEAD")]);
    const c = await agent.client.context({ timeoutMs: 5_000 });
    expect(c.files).toEqual([
      { path: path.join(agent.dir, "CLAUDE.md"), bytes: 6, truncated: false, content: "Tabs.\n" },
    ]);
    expect(c.git).toBeNull();
  });

  it("a directory deep in a work tree reports the nearest repository's branch, a worktree's too", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "tether-context-"));
    try {
      // root/.git is a repository on main; root/sub/.git a worktree naming its own git dir.
      await mkdir(path.join(root, ".git", "worktrees", "wt"), { recursive: true });
      await writeFile(path.join(root, ".git", "HEAD"), "ref: refs/heads/main\n");
      await writeFile(path.join(root, ".git", "worktrees", "wt", "HEAD"), "0123456789abcdef0123\n");
      const deep = path.join(root, "sub", "a", "b", "c");
      await mkdir(deep, { recursive: true });
      const at = (dir: string) => readContext({ dir, homeDir: root, env: {} });
      expect((await at(deep)).git).toEqual({ branch: "main" });
      await writeFile(path.join(root, "sub", ".git"), "gitdir: ../.git/worktrees/wt\n");
      expect((await at(deep)).git).toEqual({ branch: "(detached at 0123456789ab)" });
      expect((await at(root)).git).toEqual({ branch: "main" });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
