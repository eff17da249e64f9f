// GET /api/v0/context: the workspace as the agent sees it — its directory, OS, shell, date and
// git branch — and the project's instruction files (AGENTS.md, CLAUDE.md, .cursorrules, then
// ~/.tether/AGENTS.md), each cut to a per-file cap and all of them to a total cap, so what a
// control plane puts in a prompt is bounded however large the files are. Read-only.

import { open, readFile, stat } from "node:fs/promises";
import path from "node:path";
import type { ContextFile, ContextResponse } from "../contract/index.ts";
import { jsonAnswer } from "./answer.ts";
import { sendAnswer } from "./http-edge.ts";
import type { AgentHttp } from "./http-router.ts";

/** Most bytes of one instruction file that are sent. */
export const CONTEXT_FILE_MAX_BYTES = 32 * 1024;
/** Most bytes of all instruction files together. */
export const CONTEXT_TOTAL_MAX_BYTES = 64 * 1024;
/** The instruction files looked for in the workspace directory, in this order. */
export const WORKSPACE_INSTRUCTION_FILES = ["AGENTS.md", "CLAUDE.md", ".cursorrules"] as const;
/** How many parent directories are searched for a `.git` (a workspace inside a repository). */
const GIT_SEARCH_DEPTH = 32;

export interface ContextOptions {
  /** The workspace directory (absolute). */
  dir: string;
  /** The user's home: `~/.tether/AGENTS.md` is read from it. */
  homeDir: string;
  /** The agent's environment (`SHELL`). */
  env: NodeJS.ProcessEnv;
  /** Overrides the date (tests). */
  now?: () => Date;
}

export function registerContextRoute(app: AgentHttp, o: ContextOptions): void {
  app.get("/api/v0/context", async (_request, res) =>
    sendAnswer(res, jsonAnswer(200, await readContext(o))),
  );
}

export async function readContext(o: ContextOptions): Promise<ContextResponse> {
  const candidates = [
    ...WORKSPACE_INSTRUCTION_FILES.map((name) => path.join(o.dir, name)),
    path.join(o.homeDir, ".tether", "AGENTS.md"),
  ];
  // The branch and which candidates are files, looked up at once (most are missing); then the
  // files that are there are read in order, within what is left of the total.
  const git = gitBranch(o.dir);
  const sizes = await Promise.all(candidates.map(fileSize));
  const files: ContextFile[] = [];
  let left = CONTEXT_TOTAL_MAX_BYTES;
  for (const [i, file] of candidates.entries()) {
    const size = sizes[i];
    if (size === undefined) continue;
    const found = await readCapped(file, size, Math.min(CONTEXT_FILE_MAX_BYTES, left));
    if (!found) continue;
    files.push(found);
    left -= Buffer.byteLength(found.content);
  }
  const d = (o.now ?? (() => new Date()))();
  const date = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const login = o.env.SHELL;
  return {
    directory: o.dir,
    os: process.platform,
    arch: process.arch,
    shell: login && login !== "/bin/sh" ? `sh (login shell ${login})` : "sh",
    date,
    git: await git,
    files,
    limits: { file_bytes: CONTEXT_FILE_MAX_BYTES, total_bytes: CONTEXT_TOTAL_MAX_BYTES },
  };
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** The size of `file` if it is a regular file, else undefined. */
async function fileSize(file: string): Promise<number | undefined> {
  try {
    const s = await stat(file);
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The first `cap` bytes of `file`, `size` bytes long (never a split UTF-8 sequence), or
 * undefined if unreadable.
 */
async function readCapped(
  file: string,
  size: number,
  cap: number,
): Promise<ContextFile | undefined> {
  const want = Math.max(0, Math.min(size, cap));
  const buf = Buffer.alloc(want);
  let got = 0;
  try {
    const fh = await open(file, "r");
    try {
      while (got < want) {
        const { bytesRead } = await fh.read(buf, got, want - got, got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
  let end = got;
  if (got < size) while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return {
    path: file,
    bytes: size,
    truncated: end < size,
    content: buf.subarray(0, end).toString("utf8"),
  };
}

/**
 * The branch of the git work tree holding `dir` (`HEAD` read directly), or null. Every
 * ancestor's `.git` is looked up at once, not one level after another, and the nearest that
 * names a HEAD wins.
 */
async function gitBranch(dir: string): Promise<{ branch: string } | null> {
  const levels: string[] = [];
  for (let at = dir; levels.length < GIT_SEARCH_DEPTH; at = path.dirname(at)) {
    levels.push(at);
    if (path.dirname(at) === at) break;
  }
  const found = await Promise.all(levels.map((at) => headAt(path.join(at, ".git"))));
  return found.find((b) => b !== null) ?? null;
}

/** The branch that the `.git` at `dotGit` (a directory, or a file naming one) is on, or null. */
async function headAt(dotGit: string): Promise<{ branch: string } | null> {
  try {
    let gitDir = dotGit;
    if ((await stat(dotGit)).isFile()) {
      // A worktree or submodule: `.git` is a file naming the real git dir.
      const m = /^gitdir:\s*(.+)\s*$/m.exec(await readFile(dotGit, "utf8"));
      if (!m) return null;
      gitDir = path.resolve(path.dirname(dotGit), m[1]!.trim());
    }
    const head = (await readFile(path.join(gitDir, "HEAD"), "utf8")).trim();
    const ref = /^ref:\s*refs\/heads\/(.+)$/.exec(head);
    return { branch: ref ? ref[1]! : `(detached at ${head.slice(0, 12)})` };
  } catch {
    return null;
  }
}
