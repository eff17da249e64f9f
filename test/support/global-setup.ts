// Once per run of the database and end-to-end projects: the migrated PGlite data directory
// every test's fresh database starts from (test/support/db.ts), made here rather than by each
// test file — initdb and the migrations cost seconds of CPU, and there are dozens of files.

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { dumpPgliteTemplate } from "./pglite-template.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** A tarball of a migrated PGlite data directory (PgliteDatabase.dump). */
    pgliteTemplate: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-test-template-"));
  const file = path.join(dir, "migrated.tar");
  await writeFile(file, Buffer.from(await (await dumpPgliteTemplate(true)).arrayBuffer()));
  project.provide("pgliteTemplate", file);
  return () => rm(dir, { recursive: true, force: true });
}
