// A PGlite data directory as a tarball, to start fresh test databases from: initdb (and the
// migrations) once, where each test would otherwise pay seconds for them. Without vitest's
// imports, so the run's global setup can use it too.
//
// Every test database loads the whole tarball, so it is kept small: initdb's WAL segments are
// 1 MB instead of 16, and the template0 and template1 databases are dropped (no test creates a
// database on PGlite), which takes it from 41 MB to 16 and a test database's open and close from
// about 0.7 s to 0.3 s.

import { PGlite } from "@electric-sql/pglite";
import { migrate } from "../../src/chatd/db/migrate.ts";
import { openPglite } from "../../src/chatd/db/pglite.ts";

export async function dumpPgliteTemplate(migrated: boolean): Promise<Blob> {
  const init = await PGlite.create({ initDbStartParams: ["--wal-segsize=1"] });
  let initialized: Blob;
  try {
    initialized = await init.dumpDataDir("none");
  } finally {
    await init.close();
  }
  const db = await openPglite({ loadDataDir: initialized });
  try {
    if (migrated) await migrate(db);
    await db.query(
      "UPDATE pg_database SET datistemplate = false WHERE datname IN ('template0', 'template1')",
    );
    await db.exec("DROP DATABASE template0");
    await db.exec("DROP DATABASE template1");
    await db.exec("CHECKPOINT");
    return await db.dump();
  } finally {
    await db.close();
  }
}
