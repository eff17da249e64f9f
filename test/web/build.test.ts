// The server's own UI build decision: web/dist missing or older than any source under web/.
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { webBuildStale } from "../../src/cli/web-build.ts";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe("webBuildStale", () => {
  it("is stale without a build, fresh after one, stale again when a source changes", async () => {
    const web = await mkdtemp(path.join(os.tmpdir(), "tether-webbuild-"));
    dirs.push(web);
    await mkdir(path.join(web, "src"));
    await writeFile(path.join(web, "src", "main.tsx"), "x");
    const old = new Date(Date.now() - 60_000);
    await utimes(path.join(web, "src", "main.tsx"), old, old);
    expect(await webBuildStale(web)).toBe(true);

    await mkdir(path.join(web, "dist"));
    await writeFile(path.join(web, "dist", "index.html"), "built");
    expect(await webBuildStale(web)).toBe(false);

    const later = new Date(Date.now() + 60_000);
    await utimes(path.join(web, "src", "main.tsx"), later, later);
    expect(await webBuildStale(web)).toBe(true);
  });
});
