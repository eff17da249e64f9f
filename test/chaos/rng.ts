// Seeded randomness for the fault campaign: every choice of a scenario comes from its seed,
// so a scenario's plan and fault schedule replay from that seed alone.

import { createHash } from "node:crypto";

/** A 32-bit seed derived from a parent seed and labels (stable across runs and machines). */
export function deriveSeed(seed: number, ...labels: (string | number)[]): number {
  const h = createHash("sha256")
    .update([seed, ...labels].join("/"))
    .digest();
  return h.readUInt32BE(0);
}

/** mulberry32: small, fast, good enough to pick faults. */
export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** In [0, 1). */
  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** A whole number in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.next() * items.length)]!;
  }
  /** Picks by weight: `{a: 2, b: 1}` gives "a" two times in three. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let x = this.next() * total;
    for (const [k, w] of entries) {
      x -= w;
      if (x < 0) return k;
    }
    return entries.at(-1)![0];
  }
}
