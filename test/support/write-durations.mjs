// Writes test/durations.json — each test file's duration in seconds, by `project:path` — from
// the results vitest keeps of its last run (node_modules/.vite/vitest), for the order of a run
// on a fresh clone (sequencer.ts). Run it after a full `npm test`: `npm run test:durations`.

import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "../..");
const dir = path.join(root, "node_modules/.vite/vitest");
const newest = readdirSync(dir)
  .map((d) => path.join(dir, d, "results.json"))
  .map((file) => ({ file, mtimeMs: statSync(file, { throwIfNoEntry: false })?.mtimeMs }))
  .filter((c) => c.mtimeMs !== undefined)
  .sort((a, b) => b.mtimeMs - a.mtimeMs)[0];
if (newest === undefined) throw new Error(`No vitest results under ${dir}: run npm test first.`);
const { results } = JSON.parse(readFileSync(newest.file, "utf8"));
const durations = Object.fromEntries(
  results
    .map(([key, r]) => [key, Math.round(r.duration / 100) / 10])
    .sort(([a], [b]) => (a < b ? -1 : 1)),
);
const out = path.join(root, "test/durations.json");
writeFileSync(out, JSON.stringify(durations, null, 2) + "\n");
console.log(
  `${Object.keys(durations).length} files' durations written to ${path.relative(root, out)}`,
);
