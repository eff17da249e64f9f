// A PGlite data directory as a tarball, to start fresh test databases from: initdb (and the
// migrations) once, where each test would otherwise pay seconds for them. Without vitest's
// imports, so the run's global setup can use it too.

import { migrate } from "../../src/chatd/db/migrate.ts";
import { openPglite } from "../../src/chatd/db/pglite.ts";

export async function dumpPgliteTemplate(migrated: boolean): Promise<Blob> {
  const db = await openPglite();
  try {
    if (migrated) await migrate(db);
    return await db.dump();
  } finally {
    await db.close();
  }
}
