// Test helpers for real processes: process groups read from /proc (Linux), and the sweep
// that kills every group a test spawned, so nothing a test starts outlives it.

import { readdirSync, readFileSync } from "node:fs";

/** Process groups the tests learned of, killed by `killGroups` whatever happens. */
const groups = new Set<number>();

export function rememberGroup(pgid: number): void {
  groups.add(pgid);
}

/**
 * Remembers the group of every living shell this worker spawned: the children of its
 * spawner processes (which are this worker's own children).
 */
export function rememberChildGroups(): void {
  const all = pids().map((pid) => ({ pid, st: procStat(pid) }));
  const spawners = new Set(all.filter((p) => p.st?.ppid === process.pid).map((p) => p.pid));
  for (const { st } of all) {
    if (st && spawners.has(st.ppid)) groups.add(st.pgrp);
  }
}

/** SIGKILLs every remembered group (never this worker's own) and forgets them. */
export function killGroups(): void {
  rememberChildGroups();
  const own = procStat("self")?.pgrp;
  for (const pgid of groups) {
    if (pgid === own || pgid <= 1) continue;
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  groups.clear();
}

function pids(): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

/** State, parent and process group of a process, from /proc/<pid>/stat. */
function procStat(pid: number | "self"): { state: string; ppid: number; pgrp: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const [state = "", ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state, ppid: Number(ppid), pgrp: Number(pgrp) };
}

/** Living (non-zombie) members of a process group. */
export function livingMembers(pgid: number): number[] {
  return pids().filter((pid) => {
    const st = procStat(pid);
    return st !== undefined && st.pgrp === pgid && st.state !== "Z";
  });
}

/** Whether `pid` exists (a zombie not yet reaped counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `cond` every 10 ms of real time; throws after `ms`. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
