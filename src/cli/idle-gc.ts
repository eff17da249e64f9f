// Garbage collected while the server is idle. V8 collects when an allocation finds the young
// generation full or the old one past its limit, that is in the middle of whatever allocates —
// most often a chat's turn: on a small virtual machine a scavenge there took 4–11 ms and a
// mark-compact 4–13 ms, a sixth of the turns had one, and the slowest had both
// (docs/benchmarks.md, twentieth round). So, as a browser does between frames, the server
// collects the young generation once it has had almost nothing to do for a moment and the
// generation is half full. The old generation is left to V8: a full collection in each pause
// made the turns slower, not faster (docs/benchmarks.md, twenty-second round). Activity arms the
// check (`poke`): an idle server is not woken for it, and a busy one, never quiet that long,
// collects as V8 decides.

import { performance } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";

/** How long the process must have been almost idle before a collection runs. */
export const IDLE_GC_QUIET_MS = 30;
/**
 * "Idle": the process used at most this share of a CPU over the quiet period — a timer or two,
 * not a turn, which keeps it busy a third of the time or more while its parts come in. CPU time
 * rather than the event loop's busy time, which a loaded machine stretches by preempting it.
 */
const IDLE_CPU_SHARE = 0.1;
/** The young generation is collected once this share of it is in use. */
const YOUNG_USED_SHARE = 0.5;

/** A collection of the young generation (a scavenge). */
export type Collect = () => void;

export interface IdleGc {
  /** Something ran: collect once the process has been quiet for the quiet period. */
  readonly poke: () => void;
  readonly stop: () => void;
}

/**
 * Through the process's `gc()`, which V8 exposes once asked to (node's --expose-gc sets it) in a
 * new context: made at the first collection, not at start-up (a context costs milliseconds).
 * Given an options object, Node 20's V8 runs a scavenge whatever its type; `minor` asks for
 * one on any version.
 */
export function v8Collect(): Collect {
  let gc: ((o: { type: "minor"; execution: "sync" }) => void) | undefined;
  return () => {
    if (!gc) {
      v8.setFlagsFromString("--expose-gc");
      gc = vm.runInNewContext("gc") as typeof gc;
    }
    gc!({ type: "minor", execution: "sync" });
  };
}

/** What the young generation holds, and what it can hold before V8 must collect it. */
function youngSpace(): { used: number; capacity: number } {
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === "new_space");
  // The young generation's capacity is the semi-space it allocates in (space_size counts both).
  return {
    used: s?.space_used_size ?? 0,
    capacity: (s?.space_used_size ?? 0) + (s?.space_available_size ?? 0),
  };
}

export function startIdleGc(quietMs = IDLE_GC_QUIET_MS, collect = v8Collect()): IdleGc {
  let timer: NodeJS.Timeout | undefined;
  let since = { at: 0, cpu: process.cpuUsage() };
  let stopped = false;

  const poke = (): void => {
    if (stopped || timer) return;
    since = { at: performance.now(), cpu: process.cpuUsage() };
    timer = setTimeout(check, quietMs);
    timer.unref();
  };

  const check = (): void => {
    timer = undefined;
    const cpu = process.cpuUsage(since.cpu);
    const share = (cpu.user + cpu.system) / 1000 / (performance.now() - since.at);
    if (share > IDLE_CPU_SHARE) return poke(); // not quiet yet: look again
    const young = youngSpace();
    if (young.used > young.capacity * YOUNG_USED_SHARE) collect();
  };

  return {
    poke,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
