// The CLI's build (bin/cli-build.mjs) on a checkout of its own: a build runs only while every
// source it was made from is unchanged, and the sources see their own location in it.

import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { execFile } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript without declarations
import { buildCli, cliEntry, freshBuild, loadBuild } from "../../bin/cli-build.mjs";

type Entry = { main(): string; here: string; url: string };
const build = buildCli as (root: string) => Promise<string>;
const fresh = freshBuild as (root: string) => string | undefined;
const entryOf = cliEntry as (root: string) => Promise<string | undefined>;
const load = loadBuild as (file: string, o?: { cacheAfterMs?: number }) => Entry;

const execFileP = promisify(execFile);
const CLI_BUILD = fileURLToPath(new URL("../../bin/cli-build.mjs", import.meta.url));

let root: string;

async function source(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, file)), { recursive: true });
  await writeFile(path.join(root, file), text);
}

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "tether-build-"));
  await source("src/cli/message.ts", 'export const MESSAGE: string = "one";\n');
  await source(
    "src/cli/main.ts",
    [
      'import { MESSAGE } from "./message.ts";',
      "export function main(): string { return MESSAGE; }",
      "export const here = import.meta.dirname;",
      "export const url = import.meta.url;",
      "",
    ].join("\n"),
  );
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("the CLI build", () => {
  it("runs only while every source is unchanged; an edit makes the next start build again", async () => {
    const first = await build(root);
    expect(fresh(root)).toBe(first);
    expect(load(first).main()).toBe("one");

    await source("src/cli/message.ts", 'export const MESSAGE: string = "two";\n');
    expect(fresh(root)).toBeUndefined();
    const next = await entryOf(root);
    expect(next).toBeDefined();
    expect(next).not.toBe(first);
    expect(load(next!).main()).toBe("two");
    expect(fresh(root)).toBe(next);
  });

  it("judges by content, not by modification time", async () => {
    const entry = await build(root);
    const file = path.join(root, "src/cli/message.ts");
    const later = new Date(Date.now() + 60_000);
    await utimes(file, later, later);
    expect(fresh(root)).toBe(entry);
    // Same size, other bytes, an older time: still stale.
    await writeFile(file, 'export const MESSAGE: string = "six";\n');
    const earlier = new Date(Date.now() - 3_600_000);
    await utimes(file, earlier, earlier);
    expect(fresh(root)).toBeUndefined();
  });

  it("a deleted source makes the build stale", async () => {
    await build(root);
    await rm(path.join(root, "src/cli/message.ts"));
    expect(fresh(root)).toBeUndefined();
  });

  it("sources see their own location through import.meta, not the bundle's", async () => {
    const entry = load(await build(root));
    expect(path.resolve(entry.here)).toBe(path.join(root, "src/cli"));
    expect(new URL(entry.url).pathname).toBe(path.join(root, "src/cli/main.ts"));
  });

  it("keeps V8's compiled code next to the build, and a cache it cannot use is made again", async () => {
    const entry = await build(root);
    // A process of its own per load: V8 compiles a source it has seen from memory, and reads
    // no cache for it.
    const run = async () =>
      (
        await execFileP(process.execPath, [
          "--input-type=module",
          "-e",
          `const { loadBuild } = await import(${JSON.stringify(CLI_BUILD)});
           process.stdout.write(loadBuild(${JSON.stringify(entry)}, { cacheAfterMs: 0 }).main());
           setTimeout(() => {}, 300);`,
        ])
      ).stdout;
    const caches = async () =>
      (await readdir(path.dirname(entry))).filter((f) => f.endsWith(".cache"));
    expect(await caches()).toEqual([]);
    expect(await run()).toBe("one");
    const [name, ...more] = await caches();
    expect(more).toEqual([]);
    const file = path.join(path.dirname(entry), name!);
    const made = await readFile(file);
    expect(made.length).toBeGreaterThan(0);
    const { ino } = await stat(file);

    // The cache is used, not written again: a write renames a new file into its place.
    expect(await run()).toBe("one");
    expect((await stat(file)).ino).toBe(ino);

    // Garbage where the cache was: V8 refuses it, the build still runs, and it is made again.
    const garbage = Buffer.alloc(made.length, 7);
    await writeFile(file, garbage);
    expect(await run()).toBe("one");
    expect((await readFile(file)).equals(garbage)).toBe(false);
    expect(await caches()).toEqual([name]); // no temporary file left beside it
  });

  it("the manifest names every bundled source with its hash", async () => {
    await build(root);
    const manifest = JSON.parse(
      await readFile(path.join(root, "dist/cli/manifest.json"), "utf8"),
    ) as { inputs: Record<string, string> };
    expect(Object.keys(manifest.inputs)).toEqual(
      expect.arrayContaining(["src/cli/main.ts", "src/cli/message.ts"]),
    );
  });
});
