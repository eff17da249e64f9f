// The CLI's build (bin/cli-build.mjs) on a checkout of its own: a build runs only while every
// source it was made from is unchanged, and the sources see their own location in it.

import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript without declarations
import { buildCli, cliEntry, freshBuild } from "../../bin/cli-build.mjs";

type Entry = { main(): string; here: string; url: string };
const build = buildCli as (root: string) => Promise<string>;
const fresh = freshBuild as (root: string) => string | undefined;
const entryOf = cliEntry as (root: string) => Promise<string | undefined>;

let root: string;

async function source(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, file)), { recursive: true });
  await writeFile(path.join(root, file), text);
}

async function load(entry: string): Promise<Entry> {
  // A query string per load: the module cache would otherwise hand back the first build.
  return (await import(`${pathToFileURL(entry).href}?${Math.random()}`)) as Entry;
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
    expect((await load(first)).main()).toBe("one");

    await source("src/cli/message.ts", 'export const MESSAGE: string = "two";\n');
    expect(fresh(root)).toBeUndefined();
    const next = await entryOf(root);
    expect(next).toBeDefined();
    expect(next).not.toBe(pathToFileURL(first).href);
    expect((await load(new URL(next!).pathname)).main()).toBe("two");
    expect(fresh(root)).toBe(new URL(next!).pathname);
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
    const entry = await load(await build(root));
    expect(path.resolve(entry.here)).toBe(path.join(root, "src/cli"));
    expect(new URL(entry.url).pathname).toBe(path.join(root, "src/cli/main.ts"));
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
