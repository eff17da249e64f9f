// GET /api/v0/context: the workspace as the agent sees it — its directory, OS, shell, date and
// git branch — and the project's instruction files (AGENTS.md, CLAUDE.md, .cursorrules, then
// ~/.tether/AGENTS.md), each cut to a per-file cap and all of them to a total cap, so what a
// control plane puts in a prompt is bounded however large the files are. Read-only.

import { constants } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { utf8Floor, type ContextFile, type ContextResponse } from "../contract/index.ts";
import { jsonAnswer } from "./answer.ts";
import { sendAnswer } from "./http-edge.ts";
import type { AgentHttp } from "./http-router.ts";

/** Most bytes of one instruction file that are sent. */
export const CONTEXT_FILE_MAX_BYTES = 32 * 1024;
/** Most bytes of all instruction files together. */
export const CONTEXT_TOTAL_MAX_BYTES = 64 * 1024;
/** The instruction files looked for in the workspace directory, in this order. */
export const WORKSPACE_INSTRUCTION_FILES = ["AGENTS.md", "CLAUDE.md", ".cursorrules"] as const;
/** Bytes read past a cap: the most a UTF-8 sequence begun before the cap continues after it. */
const UTF8_LOOKAHEAD = 3;
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

/**
 * The context as the agent sees it now. Every lookup goes out at once (the instruction files and
 * each ancestor's `.git`; most are missing), asynchronously: a network mount that hangs holds
 * this answer, never the agent's event loop, which keeps answering and interrupting commands.
 * Nothing waits on a file's content either: every file is opened non-blocking and read only when
 * the open descriptor is a regular file (a FIFO or a device in a file's place is skipped).
 */
export async function readContext(o: ContextOptions): Promise<ContextResponse> {
  const candidates = [
    ...WORKSPACE_INSTRUCTION_FILES.map((name) => path.join(o.dir, name)),
    path.join(o.homeDir, ".tether", "AGENTS.md"),
  ];
  const git = gitBranch(o.dir);
  const heads = await Promise.all(
    candidates.map((f) => readRegularFile(f, CONTEXT_FILE_MAX_BYTES + UTF8_LOOKAHEAD)),
  );
  // In order, within what is left of the total.
  const files: ContextFile[] = [];
  let left = CONTEXT_TOTAL_MAX_BYTES;
  for (const [i, file] of candidates.entries()) {
    const head = heads[i];
    if (!head) continue;
    const content = utf8Prefix(head.bytes, Math.max(0, Math.min(CONTEXT_FILE_MAX_BYTES, left)));
    files.push({
      path: file,
      bytes: head.size,
      truncated: content.bytes < head.size,
      content: content.text,
    });
    // What the prompt gets: a byte that is not UTF-8 comes out as U+FFFD, three bytes.
    left -= Buffer.byteLength(content.text);
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

/** The first bytes of a file, and its size. */
interface FileHead {
  size: number;
  bytes: Buffer;
}

/**
 * The first `cap` bytes of `file` if it is a regular file (after symlinks), else undefined (also
 * when missing or unreadable). Opened non-blocking and checked on the open descriptor, so a FIFO
 * never holds the answer and no file can be swapped in between a check and the read.
 */
async function readRegularFile(file: string, cap: number): Promise<FileHead | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return undefined;
    const buf = Buffer.alloc(Math.max(0, Math.min(st.size, cap)));
    let got = 0;
    while (got < buf.length) {
      const { bytesRead } = await fh.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return { size: st.size, bytes: buf.subarray(0, got) };
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * At most `max` bytes of `bytes` as UTF-8, never cut in the middle of a sequence: whether the
 * byte after the cut continues one is read from `bytes`, so a caller reads a few bytes past
 * what it may keep (UTF8_LOOKAHEAD).
 */
function utf8Prefix(bytes: Buffer, max: number): { text: string; bytes: number } {
  const end = utf8Floor(bytes, Math.min(bytes.length, max));
  return { text: bytes.subarray(0, end).toString("utf8"), bytes: end };
}

/** Most bytes read of a `.git` file or a HEAD: both are one short line. */
const GIT_FILE_MAX_BYTES = 4096;

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
  const st = await stat(dotGit).catch(() => undefined);
  if (!st) return null;
  let gitDir = dotGit;
  if (st.isFile()) {
    // A worktree or submodule: `.git` is a file naming the real git dir.
    const named = await readRegularFile(dotGit, GIT_FILE_MAX_BYTES);
    const m = /^gitdir:\s*(.+)\s*$/m.exec(named?.bytes.toString("utf8") ?? "");
    if (!m) return null;
    gitDir = path.resolve(path.dirname(dotGit), m[1]!.trim());
  }
  const head = (await readRegularFile(path.join(gitDir, "HEAD"), GIT_FILE_MAX_BYTES))?.bytes
    .toString("utf8")
    .trim();
  if (head === undefined) return null;
  const ref = /^ref:\s*refs\/heads\/(.+)$/.exec(head);
  return { branch: ref ? ref[1]! : `(detached at ${head.slice(0, 12)})` };
}
