// Once per run of the database and end-to-end projects: the migrated PGlite data directory
// every test's fresh database starts from (test/support/db.ts), made here rather than by each
// test file — initdb and the migrations cost seconds of CPU, and there are dozens of files.
//
// The tarball is kept in node_modules/.cache under a hash of everything that makes it (the
// database code and its migrations, the template's code, PGlite's version), so the second
// project of a run, and every later run of an unchanged schema, reads it instead of making it
// again; a change to any of those makes a new one.

import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { dumpPgliteTemplate } from "./pglite-template.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** A tarball of a migrated PGlite data directory (PgliteDatabase.dump). */
    pgliteTemplate: string;
  }
}

const ROOT = path.resolve(import.meta.dirname, "../..");
const CACHE_DIR = path.join(ROOT, "node_modules/.cache/tether-test");
const PREFIX = "pglite-template-";
/** Another schema's template is removed once it is this old. */
const STALE_MS = 60 * 60_000;

/** A hash of what the template is made from: a change to any of it makes a new one. */
function templateKey(): string {
  const h = createHash("sha256");
  const inputs = [
    ...readdirSync(path.join(ROOT, "src/chatd/db"), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && !e.name.endsWith(".test.ts"))
      .map((e) => path.join(e.parentPath, e.name))
      .sort(),
    path.join(ROOT, "test/support/pglite-template.ts"),
    path.join(ROOT, "node_modules/@electric-sql/pglite/package.json"),
  ];
  for (const f of inputs) h.update(path.relative(ROOT, f)).update("\0").update(readFileSync(f));
  return h.digest("hex").slice(0, 24);
}

export default async function setup(project: TestProject): Promise<void> {
  const file = path.join(CACHE_DIR, `${PREFIX}${templateKey()}.tar`);
  const made = await stat(file).then(
    (s) => s.size > 0,
    () => false,
  );
  if (!made) {
    await mkdir(CACHE_DIR, { recursive: true });
    const tar = Buffer.from(await (await dumpPgliteTemplate(true)).arrayBuffer());
    // Written whole under another name first: a run that reads it never sees half of it.
    const partial = `${file}.${randomBytes(6).toString("hex")}.partial`;
    await writeFile(partial, tar);
    await rename(partial, file);
    // Other schemas' templates go once an hour old (a run of another checkout state that
    // started just now may still read its own).
    for (const old of await readdir(CACHE_DIR)) {
      const p = path.join(CACHE_DIR, old);
      if (!old.startsWith(PREFIX) || p === file) continue;
      const s = await stat(p).catch(() => undefined);
      if (s && Date.now() - s.mtimeMs > STALE_MS) await rm(p, { force: true });
    }
  }
  project.provide("pgliteTemplate", file);
}
