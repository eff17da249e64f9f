// A replica that dies mid-build: two `bin/tether server` replicas on one Postgres, a template
// whose first start hangs in Terraform, SIGKILL of the replica that runs it. The build ends
// failed once its lease expires, the workspace stays usable, and the next start (on the other
// replica, from the last saved state) succeeds. Needs Postgres and terraform.

import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabaseUrl } from "../support/db.ts";
import { LEASE_MS, startCluster, waitFor, type Cluster } from "../support/replicas.ts";
import { BIN } from "../support/server.ts";
import { terraformAvailable, type BuildJson, type WorkspaceJson } from "../support/workspaces.ts";
import { spawnSync } from "node:child_process";

const HAS_TERRAFORM = terraformAvailable();
if (!HAS_TERRAFORM) console.warn("terraform is not on PATH: the build failover test is skipped.");
if (!testDatabaseUrl())
  console.warn("TETHER_TEST_DATABASE_URL is not set: the build failover test is skipped.");

/** The first start hangs (until killed); later ones pass. The marker says the first began. */
function slowTemplate(dir: string): string {
  return `resource "terraform_data" "compute" {
  input = "once"
  provisioner "local-exec" {
    command = "if [ ! -f '${dir}/first' ]; then touch '${dir}/first'; sleep 600; fi; echo compute up"
  }
}
`;
}

describe.skipIf(!HAS_TERRAFORM || !testDatabaseUrl())("a replica killed during a build", () => {
  let cluster: Cluster;
  let scratch: string;
  beforeAll(async () => {
    cluster = await startCluster();
    scratch = await mkdtemp(path.join(os.tmpdir(), "tether-build-failover-"));
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
    await rm(scratch, { recursive: true, force: true });
  }, 60_000);

  it("its build ends failed after the lease, and the next start works on another replica", async () => {
    const [a, b] = await cluster.startReplicas(2);
    const dir = path.join(scratch, "slow");
    await mkdir(dir);
    await writeFile(path.join(dir, "main.tf"), slowTemplate(scratch));
    const push = spawnSync(
      BIN,
      ["templates", "push", dir, "--name", "slow", "--server", a!.url, "--token", cluster.token()],
      { encoding: "utf8" },
    );
    expect(push.status, push.stderr).toBe(0);
    const { templates } = await cluster.api<{ templates: { id: string }[] }>(
      a!,
      "GET",
      "/api/v1/templates",
    );
    const w = await cluster.api<WorkspaceJson>(a!, "POST", "/api/v1/workspaces", {
      name: "slow",
      template_id: templates[0]!.id,
      ttl_ms: 0,
    });
    await waitFor("the first build to hang in terraform", () =>
      existsSync(path.join(scratch, "first")),
    );
    const r = await cluster.db.query<{ worker_id: string; id: string }>(
      "SELECT id, worker_id FROM workspace_builds WHERE workspace_id = $1",
      [w.id],
    );
    const holder = [a!, b!].find((x) => x.workerId === r.rows[0]!.worker_id)!;
    const survivor = holder === a ? b! : a!;
    await holder.stop("SIGKILL");

    const failed = await waitFor(
      "the build to fail once its lease expired",
      async () => {
        const ws = await cluster.api<WorkspaceJson>(survivor, "GET", `/api/v1/workspaces/${w.id}`);
        return ws.status === "failed" && ws;
      },
      LEASE_MS * 10,
    );
    expect(failed.latest_build).toMatchObject({
      id: r.rows[0]!.id,
      transition: "start",
      status: "failed",
      error: expect.stringMatching(/lease expired/),
    });

    await cluster.api(survivor, "POST", `/api/v1/workspaces/${w.id}/start`);
    const running = await waitFor(
      "the next start to succeed",
      async () => {
        const ws = await cluster.api<WorkspaceJson>(survivor, "GET", `/api/v1/workspaces/${w.id}`);
        if (ws.latest_build?.status === "failed") throw new Error(JSON.stringify(ws.latest_build));
        return ws.status === "running" && ws;
      },
      60_000,
    );
    expect(running.latest_build).toMatchObject({ transition: "start", status: "succeeded" });
    const { builds } = await cluster.api<{ builds: BuildJson[] }>(
      survivor,
      "GET",
      `/api/v1/workspaces/${w.id}/builds`,
    );
    expect(builds.map((x) => x.status)).toEqual(["succeeded", "failed"]);
    const log = await fetch(
      new URL(`/api/v1/workspaces/${w.id}/builds/${builds[0]!.id}/logs`, survivor.url),
      { headers: { authorization: `Bearer ${cluster.token()}` } },
    );
    expect(await log.text()).toContain("compute up");
  }, 180_000);
});
