// examples/templates/docker end to end, all real: the template builds its image from this
// machine, the workspace is a container on the host network whose agent dials the server, the
// home a named volume; an idle one stops after its TTL (not during a long command). Skipped (with a message) without terraform or a Docker daemon.

import { spawnSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  commandModel,
  dockerAvailable,
  EXAMPLES,
  removeDockerWorkspaces,
  startWorkspaceServer,
  terraformAvailable,
  toolResults,
  waitFor,
  type WorkspaceJson,
  type WorkspaceServer,
} from "../support/workspaces.ts";

const HAS_TERRAFORM = terraformAvailable();
const HAS_DOCKER = HAS_TERRAFORM && dockerAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the docker template's end-to-end test is skipped.");
else if (!HAS_DOCKER)
  console.warn(
    "No Docker daemon answers `docker info`: the docker template's end-to-end test is skipped.",
  );

function docker(...args: string[]): string {
  const r = spawnSync("docker", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`docker ${args.join(" ")}: ${r.stderr}`);
  return r.stdout.trim();
}

describe.skipIf(!HAS_DOCKER)("examples/templates/docker", () => {
  let s: WorkspaceServer;
  const made: string[] = [];

  beforeAll(async () => {
    s = await startWorkspaceServer();
    commandModel(s.fake);
    await s.push(path.join(EXAMPLES, "docker"), "docker");
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    removeDockerWorkspaces(made);
  }, 60_000);

  it("start, a chat's command runs in the container; stop removes the container and keeps the volume; a message starts it again with the file there; delete removes the volume", async () => {
    const w = await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
      name: "box",
      template_id: await s.templateId("docker"),
      ttl_ms: 0,
    });
    made.push(w.id);
    const container = `tether-ws-${w.id}`;
    const volume = `tether-home-${w.id}`;
    await s.waitRunning(w.id, 120_000);
    expect(
      docker("inspect", "-f", "{{.State.Running}} {{.HostConfig.NetworkMode}}", container),
    ).toBe("true host");

    const chat = await s.chat(w.id, "$ echo persisted > note.txt && pwd && cat /etc/hostname");
    const first = await s.settle(chat);
    expect(toolResults(first.messages)).toMatchObject([
      { status: "completed", exit_code: 0, output: expect.stringMatching(/^\/home\/workspace\n/) },
    ]);
    // It ran in the container: the file is in its volume, not on the server's disk.
    expect(
      docker("run", "--rm", "-v", `${volume}:/v`, "tether-workspace:local", "cat", "/v/note.txt"),
    ).toBe("persisted");

    expect((await s.raw("POST", `/api/v1/workspaces/${w.id}/stop`)).status).toBe(202);
    await s.waitStatus(w.id, "stopped", 60_000);
    expect(docker("ps", "-a", "-q", "--filter", `name=^${container}$`)).toBe("");
    expect(docker("volume", "ls", "-q", "--filter", `name=^${volume}$`)).toBe(volume);

    await s.send(chat, "$ cat note.txt");
    const second = await s.settle(chat, 120_000);
    expect(second.status).toBe("waiting");
    expect(toolResults(second.messages).at(-1)).toMatchObject({
      status: "completed",
      output: "persisted\n",
    });
    expect((await s.builds(w.id))[0]).toMatchObject({
      transition: "start",
      reason: "chat",
      status: "succeeded",
    });

    expect((await s.raw("DELETE", `/api/v1/workspaces/${w.id}`)).status).toBe(202);
    await waitFor(
      "the workspace to be gone",
      async () => (await s.raw("GET", `/api/v1/workspaces/${w.id}`)).status === 404,
      60_000,
    );
    expect(docker("ps", "-a", "-q", "--filter", `name=^${container}$`)).toBe("");
    expect(docker("volume", "ls", "-q", "--filter", `name=^${volume}$`)).toBe("");
  }, 300_000);

  it("an idle container stops after its TTL, never during a command longer than the TTL, and keeps its volume", async () => {
    const w = await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
      name: "idle-box",
      template_id: await s.templateId("docker"),
      ttl_ms: 3_000,
    });
    made.push(w.id);
    const container = `tether-ws-${w.id}`;
    const volume = `tether-home-${w.id}`;
    await s.waitRunning(w.id, 120_000);
    const autostops = async () => (await s.builds(w.id)).filter((b) => b.reason === "autostop");

    const chat = await s.chat(w.id, "$ sleep 5 && echo slept > slept.txt && echo slept");
    const long = await s.settle(chat, 60_000);
    expect(toolResults(long.messages)).toMatchObject([{ status: "completed", output: "slept\n" }]);
    expect(await autostops()).toEqual([]);

    const stopped = await s.waitStatus(w.id, "stopped", 60_000);
    expect(stopped.latest_build).toMatchObject({ transition: "stop", reason: "autostop" });
    expect(docker("ps", "-a", "-q", "--filter", `name=^${container}$`)).toBe("");
    expect(
      docker("run", "--rm", "-v", `${volume}:/v`, "tether-workspace:local", "cat", "/v/slept.txt"),
    ).toBe("slept");

    expect((await s.raw("DELETE", `/api/v1/workspaces/${w.id}`)).status).toBe(202);
    await waitFor(
      "the workspace to be gone",
      async () => (await s.raw("GET", `/api/v1/workspaces/${w.id}`)).status === 404,
      60_000,
    );
    expect(docker("volume", "ls", "-q", "--filter", `name=^${volume}$`)).toBe("");
  }, 300_000);
});
