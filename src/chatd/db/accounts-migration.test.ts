// Migration 004 on a database made before it: the first user (an admin then) becomes the owner,
// other users keep their roles, and model configs keep working with free prices, enabled.

import { copyFile, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { openTestDatabase } from "../../../test/support/db.ts";
import { migrate } from "./migrate.ts";

const MIGRATIONS = fileURLToPath(new URL("./migrations/", import.meta.url));

describe("migration 004 (accounts)", () => {
  it("the first user of an older database becomes the owner", { timeout: 90_000 }, async () => {
    const t = await openTestDatabase("pglite", { migrate: false });
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-migrations-"));
    try {
      for (const f of ["001_init.sql", "002_edits.sql", "003_replicas.sql"])
        await copyFile(path.join(MIGRATIONS, f), path.join(dir, f));
      await migrate(t.db, pathToFileURL(dir + path.sep));
      await t.db.query(
        `INSERT INTO users (id, email, role, password_hash, created_at) VALUES
          (gen_random_uuid(), 'second@example.com', 'admin', 'x', now()),
          (gen_random_uuid(), 'first@example.com', 'admin', 'x', now() - interval '1 day'),
          (gen_random_uuid(), 'member@example.com', 'member', 'x', now())`,
      );
      await t.db.query(
        "INSERT INTO model_configs (id, provider, model) VALUES (gen_random_uuid(), 'demo', 'demo')",
      );
      await migrate(t.db);
      const users = await t.db.query("SELECT email, role FROM users ORDER BY email");
      expect(users.rows).toEqual([
        { email: "first@example.com", role: "owner" },
        { email: "member@example.com", role: "member" },
        { email: "second@example.com", role: "admin" },
      ]);
      const models = await t.db.query(
        "SELECT enabled, input_price_per_mtok_micros::int AS i, output_price_per_mtok_micros::int AS o FROM model_configs",
      );
      expect(models.rows).toEqual([{ enabled: true, i: 0, o: 0 }]);
      await expect(
        t.db.query("UPDATE users SET role = 'root' WHERE email = 'member@example.com'"),
      ).rejects.toThrow();
    } finally {
      await rm(dir, { recursive: true, force: true });
      await t.close();
    }
  });
});
