// Garbage collected while the server is idle. V8 collects when an allocation finds the young
// generation full or the old one past its limit, that is in the middle of whatever allocates —
// most often a chat's turn: on a small virtual machine a scavenge there took 4–11 ms and a
// mark-compact 4–13 ms, a sixth of the turns had one, and the slowest had both
// (docs/performance.md, twentieth round). So, as a browser does between frames, the server
// collects once it has had almost nothing to do for a moment: the young generation when it is
// half full, the old one when it grew by a tenth since its last full collection (V8's own came
// at a third more, or later). Activity arms the check (`poke`): an idle server is not woken for it,
// and a busy one, never quiet that long, collects as V8 decides.

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
/** The old generation is collected once it grew by this share since its last full collection. */
const OLD_GROWTH_SHARE = 0.1;

/** A collection of one generation: the young ("minor") or all of the heap ("major"). */
export type Collect = (type: "minor" | "major") => void;

export interface IdleGc {
  /** Something ran: collect once the process has been quiet for the quiet period. */
  readonly poke: () => void;
  readonly stop: () => void;
}

/**
 * Through the process's `gc()`, which V8 exposes once asked to (node's --expose-gc sets it) in a
 * new context: made at the first collection, not at start-up (a context costs milliseconds).
 */
export function v8Collect(): Collect {
  let gc: ((o: { type: string; execution: "sync" }) => void) | undefined;
  return (type) => {
    if (!gc) {
      v8.setFlagsFromString("--expose-gc");
      gc = vm.runInNewContext("gc") as typeof gc;
    }
    gc!({ type, execution: "sync" });
  };
}

/** What space `name` holds, and what it can hold before V8 must collect or grow it. */
function space(name: "new_space" | "old_space"): { used: number; capacity: number } {
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === name);
  // The young generation's capacity is the semi-space it allocates in (space_size counts both).
  return {
    used: s?.space_used_size ?? 0,
    capacity: (s?.space_used_size ?? 0) + (s?.space_available_size ?? 0),
  };
}

export function startIdleGc(quietMs = IDLE_GC_QUIET_MS, collect = v8Collect()): IdleGc {
  let oldAfterMajor = space("old_space").used;
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
    const old = space("old_space").used;
    oldAfterMajor = Math.min(oldAfterMajor, old); // V8 collected it since, on its own
    if (old > oldAfterMajor * (1 + OLD_GROWTH_SHARE)) {
      collect("major");
      oldAfterMajor = space("old_space").used;
      return;
    }
    const young = space("new_space");
    if (young.used > young.capacity * YOUNG_USED_SHARE) collect("minor");
  };

  return {
    poke,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
