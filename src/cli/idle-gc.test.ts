import { constants, performance, PerformanceObserver } from "node:perf_hooks";
import v8 from "node:v8";
import { afterEach, describe, expect, it } from "vitest";
import { startIdleGc, v8Collect, type Collect, type IdleGc } from "./idle-gc.ts";

const QUIET_MS = 30;

/** Scavenges (minor collections) from now on, by their start time. */
function watchScavenges(): { starts: number[]; stop: () => void } {
  const starts: number[] = [];
  const o = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) starts.push(e.startTime);
    }
  });
  o.observe({ entryTypes: ["gc"] });
  return { starts, stop: () => o.disconnect() };
}

function youngShare(): number {
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === "new_space")!;
  return s.space_used_size / (s.space_used_size + s.space_available_size);
}

/** Allocates until the young generation is more than `share` in use. */
function fillYoung(share: number): void {
  let keep: number[][] = [];
  while (youngShare() <= share) {
    for (let i = 0; i < 1000; i++) keep.push([i, i + 1]);
    if (keep.length > 200_000) keep = [];
  }
}

/** Keeps this thread's CPU busy for `ms`, allocating next to nothing. */
function spin(ms: number): void {
  const end = performance.now() + ms;
  let n = 0;
  while ((++n & 0xffff) !== 0 || performance.now() < end);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until `done()` (a loaded machine runs timers late), at most 5 s; it looks seldom, so its
 * own wake-ups leave the process quiet.
 */
async function until(done: () => boolean): Promise<void> {
  for (const t0 = Date.now(); !done() && Date.now() - t0 < 5_000;) await sleep(QUIET_MS * 3);
}

describe("idle GC", () => {
  let idle: IdleGc | undefined;
  afterEach(() => idle?.stop());

  /** The real collections, each recorded with its time. */
  function recording(): { calls: { at: number }[]; collect: Collect } {
    const real = v8Collect();
    const calls: { at: number }[] = [];
    return {
      calls,
      collect: () => {
        calls.push({ at: performance.now() });
        real();
      },
    };
  }

  it("collects a half-full young generation once the process has been quiet", async () => {
    const r = recording();
    idle = startIdleGc(QUIET_MS, r.collect);
    fillYoung(0.6);
    const watch = watchScavenges();
    idle.poke();
    await until(() => r.calls.length > 0);
    // The observer hears of a collection a moment after it.
    const ran = () => watch.starts.filter((t) => t >= r.calls[0]!.at).length;
    await until(() => ran() > 0);
    watch.stop();
    // The idle GC's own call ran a real scavenge (not V8 on its own), which emptied it.
    expect(r.calls).toHaveLength(1);
    expect(ran()).toBeGreaterThan(0);
    expect(youngShare()).toBeLessThan(0.5);
  });

  it("waits while the process is busy, then collects", async () => {
    const r = recording();
    idle = startIdleGc(QUIET_MS, r.collect);
    fillYoung(0.6);
    idle.poke();
    spin(QUIET_MS * 3); // the check comes due while busy: it looks again a quiet period later
    fillYoung(0.6); // again, had V8 collected it meanwhile
    const busyEnded = performance.now();
    await until(() => r.calls.length > 0);
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.at).toBeGreaterThanOrEqual(busyEnded + QUIET_MS * 0.9);
  });

  it("leaves a young generation under half full alone", async () => {
    const r = recording();
    idle = startIdleGc(QUIET_MS, r.collect);
    v8Collect()(); // empty now: whatever the test allocates next stays far under half
    idle.poke();
    await sleep(QUIET_MS * 3);
    expect(youngShare()).toBeLessThan(0.5);
    expect(r.calls).toEqual([]);
  });

  it("collects nothing unless poked, and nothing once stopped", async () => {
    const r = recording();
    idle = startIdleGc(QUIET_MS, r.collect);
    fillYoung(0.6);
    await sleep(QUIET_MS * 3);
    idle.stop();
    idle.poke();
    await sleep(QUIET_MS * 3);
    expect(r.calls).toEqual([]);
  });
});
