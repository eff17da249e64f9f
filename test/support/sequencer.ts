// The order test files start in: the longest first, so a run does not end on a long file
// started late while the other workers sit idle. Vitest orders by the durations of its last
// run, which it keeps in node_modules — so a fresh clone (CI) ran the largest files first
// instead, and the long, small ones (the chaos and fuzz campaigns) last: on one 2-core
// machine a run without the durations took 702 s, the next, with them, 612 s. Where vitest
// has no duration for a file, the one in test/durations.json (a full run's, written by
// `npm run test:durations`) stands in. Projects keep vitest's order; a file that failed last
// time still goes first, and one known to neither, too (as vitest does: its duration becomes
// known).

import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import durations from "../durations.json" with { type: "json" };

const known: Record<string, number> = durations;

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const projectRank = new Map<unknown, number>();
    for (const f of base)
      if (!projectRank.has(f.project)) projectRank.set(f.project, projectRank.size);
    const weight = (f: TestSpecification): number => {
      const key = `${f.project.name}:${path.relative(this.ctx.config.root, f.moduleId)}`;
      const last = this.ctx.cache.getFileTestResults(key);
      if (last?.failed) return Infinity;
      const seconds = known[key];
      return last?.duration ?? (seconds === undefined ? Infinity : seconds * 1000);
    };
    const weights = new Map(base.map((f) => [f, weight(f)]));
    const longer = (a: TestSpecification, b: TestSpecification) =>
      weights.get(a)! > weights.get(b)! ? -1 : weights.get(a)! < weights.get(b)! ? 1 : 0;
    return base.sort(
      (a, b) => projectRank.get(a.project)! - projectRank.get(b.project)! || longer(a, b),
    );
  }
}
