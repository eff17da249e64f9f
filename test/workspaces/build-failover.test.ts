// A replica that dies mid-build: two `bin/tether server` replicas on one Postgres, a template
// whose first start hangs in Terraform, SIGKILL of the replica that runs it. The build ends
// failed once its lease expires, the workspace stays usable, and the next start (on the other
// replica, from the last saved state) succeeds. And the same during a start a chat's message
// made (the local template, its agent dialling out): the turn ends in error naming the build,
// and the command runs once when the chat goes on — one run per tool call, the file written
// before the stop still there. Needs Postgres and terraform.

import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabaseUrl } from "../support/db.ts";
import { LEASE_MS, startCluster, waitFor, type Cluster } from "../support/replicas.ts";
import { BIN } from "../support/server.ts";
import {
  commandModel,
  EXAMPLES,
  terraformAvailable,
  toolResults,
  type BuildJson,
  type WorkspaceJson,
} from "../support/workspaces.ts";
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

/**
 * examples/templates/local with its homes under `root`, and a gate before the agent starts
 * that hangs (once) while `<root>/hang-armed` exists, writing `<root>/hung` as it begins.
 */
async function gatedLocalTemplate(dir: string, root: string): Promise<void> {
  const local = path.join(EXAMPLES, "local");
  await mkdir(dir);
  for (const f of await readdir(local)) {
    let text = await readFile(path.join(local, f), "utf8");
    if (f === "main.tf") {
      text = text
        .replace('default = "~/.tether-workspaces"', `default = "${root}"`)
        .replace(
          "depends_on = [terraform_data.home]",
          "depends_on = [terraform_data.home, terraform_data.gate]",
        );
      if (!text.includes(root) || !text.includes("terraform_data.gate]"))
        throw new Error("examples/templates/local/main.tf changed: adjust this test's edits");
    }
    await writeFile(path.join(dir, f), text);
  }
  await writeFile(
    path.join(dir, "gate.tf"),
    `resource "terraform_data" "gate" {
  count            = var.tether_start_count
  triggers_replace = [sha256(var.tether_agent_token)]
  provisioner "local-exec" {
    command = "if [ -f '${root}/hang-armed' ] && [ ! -f '${root}/hung' ]; then touch '${root}/hung'; sleep 600; fi"
  }
}
`,
  );
}

/** Kills the agents the local template left under `root` (their pid files). */
async function killLocalAgents(root: string): Promise<void> {
  for (const f of (await readdir(root).catch(() => [] as string[])).filter((x) =>
    x.endsWith(".agent.pid"),
  )) {
    const pid = Number((await readFile(path.join(root, f), "utf8").catch(() => "")).trim());
    try {
      if (pid > 0) process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

describe.skipIf(!HAS_TERRAFORM || !testDatabaseUrl())("a replica killed during a build", () => {
  let cluster: Cluster;
  let scratch: string;
  beforeAll(async () => {
    cluster = await startCluster();
    scratch = await mkdtemp(path.join(os.tmpdir(), "tether-build-failover-"));
    commandModel(cluster.fake);
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
    await killLocalAgents(path.join(scratch, "homes"));
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
    await survivor.stop("SIGTERM"); // the next test starts replicas of its own
  }, 180_000);

  it("during a start a chat's message made: the turn ends in error naming the build, and the command runs once when the chat goes on", async () => {
    const [a, b] = await cluster.startReplicas(2);
    const root = path.join(scratch, "homes");
    await mkdir(root);
    const dir = path.join(scratch, "gated");
    await gatedLocalTemplate(dir, root);
    const push = spawnSync(
      BIN,
      ["templates", "push", dir, "--name", "gated", "--server", a!.url, "--token", cluster.token()],
      { encoding: "utf8" },
    );
    expect(push.status, push.stderr).toBe(0);
    const { templates } = await cluster.api<{ templates: { id: string; name: string }[] }>(
      a!,
      "GET",
      "/api/v1/templates",
    );
    const w = await cluster.api<WorkspaceJson>(a!, "POST", "/api/v1/workspaces", {
      name: "gated",
      template_id: templates.find((t) => t.name === "gated")!.id,
      ttl_ms: 0,
    });
    const runs = path.join(root, w.id, "runs.txt");
    const statusOf = (r: typeof a) =>
      cluster.api<WorkspaceJson>(r!, "GET", `/api/v1/workspaces/${w.id}`);
    const chat = (
      await cluster.api<{ id: string }>(a!, "POST", "/api/v1/chats", {
        workspace_id: w.id,
        message: "$ echo first >> runs.txt",
      })
    ).id;
    const first = await cluster.settle(a!, chat, 120_000);
    expect(toolResults(first.messages)).toMatchObject([{ status: "completed", exit_code: 0 }]);
    expect(await readFile(runs, "utf8")).toBe("first\n");

    await cluster.api(a!, "POST", `/api/v1/workspaces/${w.id}/stop`);
    await waitFor(
      "the workspace to stop",
      async () => (await statusOf(a)).status === "stopped",
      60_000,
    );
    await writeFile(path.join(root, "hang-armed"), "");

    // The message starts the workspace (a build of reason chat), which hangs in Terraform.
    await cluster.api(b!, "POST", `/api/v1/chats/${chat}/messages`, {
      text: "$ echo second >> runs.txt",
    });
    await waitFor(
      "the chat's start to hang in terraform",
      () => existsSync(path.join(root, "hung")),
      60_000,
    );
    const r = await cluster.db.query<{ id: string; worker_id: string; reason: string }>(
      "SELECT id, worker_id, reason FROM workspace_builds WHERE workspace_id = $1 AND status = 'running'",
      [w.id],
    );
    expect(r.rows).toMatchObject([{ reason: "chat" }]);
    const holder = [a!, b!].find((x) => x.workerId === r.rows[0]!.worker_id)!;
    const survivor = holder === a ? b! : a!;
    await holder.stop("SIGKILL");

    // The build ends failed once its lease expired; the turn ends in error naming it, and no
    // command ran.
    const ended = await cluster.settle(survivor, chat, LEASE_MS * 20);
    expect(ended.status).toBe("error");
    const c = await cluster.api<{ last_error: unknown }>(survivor, "GET", `/api/v1/chats/${chat}`);
    expect(JSON.stringify(c.last_error)).toContain(r.rows[0]!.id);
    expect(await readFile(runs, "utf8")).toBe("first\n");

    // The chat goes on: its message starts the workspace again (the gate passes now), and the
    // command runs there once, next to the file written before the stop.
    await cluster.api(survivor, "POST", `/api/v1/chats/${chat}/messages`, {
      text: "$ echo third >> runs.txt && cat runs.txt",
    });
    const after = await cluster.settle(survivor, chat, 120_000);
    expect(after.status).toBe("waiting");
    expect(toolResults(after.messages).at(-1)).toMatchObject({
      status: "completed",
      exit_code: 0,
      output: "first\nthird\n",
    });
    expect(await readFile(runs, "utf8")).toBe("first\nthird\n");
    const { builds } = await cluster.api<{ builds: BuildJson[] }>(
      survivor,
      "GET",
      `/api/v1/workspaces/${w.id}/builds`,
    );
    expect(builds.map((x) => `${x.transition} ${x.reason} ${x.status}`)).toEqual([
      "start chat succeeded",
      "start chat failed",
      "stop user succeeded",
      "start user succeeded",
    ]);

    await cluster.api(survivor, "DELETE", `/api/v1/workspaces/${w.id}`);
    await waitFor(
      "the workspace to be gone",
      async () => {
        const res = await fetch(new URL(`/api/v1/workspaces/${w.id}`, survivor.url), {
          headers: { authorization: `Bearer ${cluster.token()}` },
        });
        return res.status === 404;
      },
      60_000,
    );
    expect(existsSync(path.join(root, w.id))).toBe(false);
  }, 300_000);
});
