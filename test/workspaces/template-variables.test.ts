// What a template gets, end to end with real Terraform: a template that records its
// TF_VAR_tether_* variables at every build, on a `bin/tether server --access-url URL`. The
// start hands it the workspace, its owner's email, a start count of 1, the access URL (not the
// listen URL), this server's absolute `bin/tether` and a fresh agent token, which a real
// `tether agent --server` connects with; the stop hands it a count of 0 and no token, and the
// start's token is revoked: the connected agent is cut off and refused from then on.
// Skipped (with a message) without terraform.

import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAgentProcess } from "../support/dialout.ts";
import { BIN } from "../support/server.ts";
import {
  startWorkspaceServer,
  terraformAvailable,
  waitFor,
  type WorkspaceJson,
  type WorkspaceServer,
} from "../support/workspaces.ts";

const HAS_TERRAFORM = terraformAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the template variables test is skipped.");

/** Where agents are told to dial: not the listen URL, so the test sees which one it got. */
const ACCESS_URL = "http://tether-access.invalid:8443";

/** A template whose every build (start or stop) appends its variables to `out`, one line. */
function recordingTemplate(out: string): string {
  const names = [
    "tether_workspace_id",
    "tether_workspace_name",
    "tether_owner",
    "tether_start_count",
    "tether_server_url",
    "tether_bin",
    "tether_agent_token",
  ];
  const vars = names.map((n) => `variable "${n}" {\n  type = string\n}\n`).join("");
  const env = names.map((n) => `      ${n.toUpperCase()} = var.${n}`).join("\n");
  const line = names.map((n) => `"$${n.toUpperCase()}"`).join(" ");
  return `${vars}
resource "terraform_data" "record" {
  triggers_replace = [var.tether_start_count, sha256(var.tether_agent_token)]
  provisioner "local-exec" {
    command = "printf '%s|%s|%s|%s|%s|%s|%s\\\\n' ${line.replaceAll('"', '\\"')} >> '${out}'"
    environment = {
${env}
    }
  }
}
`;
}

describe.skipIf(!HAS_TERRAFORM)("the TF_VAR_tether_* variables", () => {
  let s: WorkspaceServer;
  let scratch: string;
  const cleanups: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), "tether-template-vars-"));
    s = await startWorkspaceServer({ args: ["--access-url", ACCESS_URL] });
  }, 120_000);
  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
    await s?.close();
    await rm(scratch, { recursive: true, force: true });
  }, 60_000);

  it("a start gets the workspace, its owner, count 1, the access URL, bin/tether and a token an agent connects with; a stop gets count 0, no token, and the start's token is refused", async () => {
    const out = path.join(scratch, "vars.txt");
    const dir = path.join(scratch, "template");
    await mkdir(dir);
    await writeFile(path.join(dir, "main.tf"), recordingTemplate(out));
    await s.push(dir, "vars");
    const w = await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
      name: "vars-box",
      template_id: await s.templateId("vars"),
      ttl_ms: 0,
    });
    const built = async () => {
      const ws = await s.workspace(w.id);
      if (ws.latest_build?.status === "failed")
        throw new Error(`build failed: ${JSON.stringify(ws.latest_build)}`);
      return ws.latest_build?.status === "succeeded" && ws;
    };
    expect(await waitFor("the start to succeed", built, 60_000)).toMatchObject({
      status: "running",
      agent: { connected: false },
    });
    const lines = async () =>
      (await readFile(out, "utf8"))
        .trimEnd()
        .split("\n")
        .map((l) => l.split("|"));
    const [start] = await lines();
    const [id, name, owner, count, url, bin, token] = start!;
    expect({ id, name, owner, count, url, bin }).toEqual({
      id: w.id,
      name: "vars-box",
      owner: "owner@example.com",
      count: "1",
      url: ACCESS_URL,
      bin: BIN,
    });
    expect(token).toMatch(/^\S{20,}$/);

    // The start's token is a real agent token: an agent dialling out with it connects.
    const agent = startAgentProcess({ server: s.url, dir: scratch, token: token! }, (f) =>
      cleanups.push(f),
    );
    await agent.connected();
    await waitFor("the workspace to read as connected", async () => {
      return (await s.workspace(w.id)).agent.connected;
    });

    expect((await s.raw("POST", `/api/v1/workspaces/${w.id}/stop`)).status).toBe(202);
    await s.waitStatus(w.id, "stopped");
    const [, stop] = await lines();
    expect(stop).toEqual([w.id, "vars-box", "owner@example.com", "0", ACCESS_URL, BIN, ""]);
    // The stop revoked the start's token: the live connection ends and every dial is refused.
    await waitFor("the agent to be refused", () => agent.log().includes("refused the agent token"));
    expect(agent.connects()).toBe(1);
    expect((await s.workspace(w.id)).agent.connected).toBe(false);
    await agent.stop();
  }, 120_000);
});
