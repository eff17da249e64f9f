// examples/templates/local end to end, all real: `bin/tether server`, `bin/tether templates
// push`, Terraform running the template, agents started with `tether_bin agent --server`, and
// chats whose commands run in the workspace. Skipped (with a message) without terraform.

import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alive } from "../support/server.ts";
import {
  commandModel,
  EXAMPLES,
  startWorkspaceServer,
  terraformAvailable,
  toolResults,
  waitFor,
  type WorkspaceJson,
  type WorkspaceServer,
} from "../support/workspaces.ts";

const HAS_TERRAFORM = terraformAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the local template's end-to-end tests are skipped.");

/** A provider key in the server's environment that no template may see. */
const SERVER_SECRET = "sk-server-secret-never-in-a-workspace";
const TTL_MS = 3_000;

describe.skipIf(!HAS_TERRAFORM)("examples/templates/local", () => {
  let s: WorkspaceServer;
  let templateId: string;

  beforeAll(async () => {
    s = await startWorkspaceServer({ env: { ANTHROPIC_API_KEY: SERVER_SECRET } });
    commandModel(s.fake);
    expect(await s.push(path.join(EXAMPLES, "local"), "local")).toMatch(
      /^created template local \(.+\), version 1/,
    );
    templateId = await s.templateId("local");
  }, 120_000);
  afterAll(async () => s?.close(), 60_000);

  const homeOf = (id: string) => path.join(s.home, ".tether-workspaces", id);
  const agentPid = async (id: string) =>
    Number((await readFile(`${homeOf(id)}.agent.pid`, "utf8")).trim());

  it("start, agent connected, a chat's command runs there; stop kills the agent and keeps the home; a message starts it again and the file is there; delete destroys it", async () => {
    const created = await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
      name: "lifecycle",
      template_id: templateId,
      ttl_ms: 0,
    });
    expect(created).toMatchObject({
      status: "starting",
      template_id: templateId,
      ttl_ms: 0,
      deadline: null,
      agent: { connected: false },
      latest_build: { transition: "start", reason: "user", status: "pending" },
    });
    const id = created.id;
    const running = await s.waitRunning(id);
    expect(running.deadline).toBeNull(); // ttl 0: never stops by itself
    const pid = await agentPid(id);
    expect(alive(pid)).toBe(true);

    const chat = await s.chat(id, "$ echo persisted > note.txt && pwd");
    const first = await s.settle(chat);
    expect(first.status).toBe("waiting");
    expect(toolResults(first.messages)).toMatchObject([
      { status: "completed", exit_code: 0, output: `${homeOf(id)}\n` },
    ]);

    expect((await s.raw("POST", `/api/v1/workspaces/${id}/stop`)).status).toBe(202);
    await s.waitStatus(id, "stopped");
    expect(alive(pid)).toBe(false);
    expect(await readFile(path.join(homeOf(id), "note.txt"), "utf8")).toBe("persisted\n");
    expect((await s.workspace(id)).agent.connected).toBe(false);

    // The message starts the workspace, and its command waits for the new agent's margin.
    await s.send(chat, "$ cat note.txt");
    const second = await s.settle(chat);
    expect(second.status).toBe("waiting");
    expect(toolResults(second.messages).at(-1)).toMatchObject({
      status: "completed",
      output: "persisted\n",
    });
    const builds = await s.builds(id);
    expect(builds.map((b) => [b.transition, b.reason, b.status])).toEqual([
      ["start", "chat", "succeeded"],
      ["stop", "user", "succeeded"],
      ["start", "user", "succeeded"],
    ]);
    const log = await s.raw("GET", `/api/v1/workspaces/${id}/builds/${builds[0]!.id}/logs`);
    expect(log.status).toBe(200);
    expect(log.text).toContain("Apply complete!");
    const restarted = await agentPid(id);
    expect(restarted).not.toBe(pid);

    expect((await s.raw("DELETE", `/api/v1/workspaces/${id}`)).status).toBe(202);
    await waitFor(
      "the workspace to be gone",
      async () => (await s.raw("GET", `/api/v1/workspaces/${id}`)).status === 404,
      60_000,
    );
    expect(alive(restarted)).toBe(false);
    expect(existsSync(homeOf(id))).toBe(false);
    const { workspaces } = await s.api<{ workspaces: { id: string }[] }>(
      "GET",
      "/api/v1/workspaces",
    );
    expect(workspaces.map((w) => w.id)).not.toContain(id);
  }, 180_000);

  it("an idle workspace stops after its TTL, but never while a long command, a background process, a long model call or an open chat stream runs", async () => {
    const id = (
      await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
        name: "idle",
        template_id: templateId,
        ttl_ms: TTL_MS,
      })
    ).id;
    await s.waitRunning(id);
    const autostops = async () => (await s.builds(id)).filter((b) => b.reason === "autostop");

    // A foreground command 2 s longer than the TTL: it completes, nothing stopped it.
    const chat = await s.chat(id, "$ sleep 5 && echo slept");
    const long = await s.settle(chat);
    expect(toolResults(long.messages)).toMatchObject([{ status: "completed", output: "slept\n" }]);
    expect(await autostops()).toEqual([]);

    // A model call that streams for longer than the TTL.
    await s.send(chat, "stall:5");
    const stalled = await s.settle(chat);
    expect(stalled.messages.at(-1)?.parts).toMatchObject([
      { type: "text", text: expect.stringMatching(/^slow( slow){4}$/) },
    ]);
    expect(await autostops()).toEqual([]);

    // A background process: the turn ends at once, the process runs on past the TTL and
    // writes its marker at the end — which it could not, had the stop killed it.
    await s.send(chat, "$& sleep 5 && echo done > marker.txt");
    const bg = await s.settle(chat);
    expect(toolResults(bg.messages).at(-1)).toMatchObject({ status: "background" });
    const marker = path.join(homeOf(id), "marker.txt");
    await waitFor("the background process's marker", () => existsSync(marker), 30_000);
    expect(await autostops()).toEqual([]);

    // An open chat stream is activity too: twice the TTL with one open, and it still runs.
    const stream = new AbortController();
    const res = await fetch(new URL(`/api/v1/chats/${chat}/stream`, s.url), {
      headers: { authorization: `Bearer ${s.token}` },
      signal: stream.signal,
    });
    expect(res.status).toBe(200);
    const read = res.body!.getReader();
    const reading = (async () => {
      for (;;) if ((await read.read().catch(() => ({ done: true }))).done) return;
    })();
    await new Promise((r) => setTimeout(r, TTL_MS * 2));
    expect(await autostops()).toEqual([]);
    expect((await s.workspace(id)).status).toBe("running");
    stream.abort();
    await reading;

    // Then nothing happens: it stops by itself, keeping its home.
    const stopped = await s.waitStatus(id, "stopped", 30_000);
    expect(stopped.latest_build).toMatchObject({ transition: "stop", reason: "autostop" });
    expect(await autostops()).toHaveLength(1);
    expect(existsSync(marker)).toBe(true);
  }, 180_000);

  it("a start that fails ends the chat's turn in error naming the build; its log has the output, the agent token scrubbed and no server secret; a start may be tried again", async () => {
    const broken = path.join(s.home, "broken");
    const { mkdir, writeFile } = await import("node:fs/promises");
    await mkdir(broken);
    await writeFile(
      path.join(broken, "main.tf"),
      `variable "tether_agent_token" {
  type = string
}
resource "terraform_data" "boom" {
  provisioner "local-exec" {
    command = "echo token=$T; env | sort; echo boom; exit 3"
    environment = {
      T = var.tether_agent_token
    }
  }
}
`,
    );
    await s.push(broken, "broken");
    const id = (
      await s.api<WorkspaceJson>("POST", "/api/v1/workspaces", {
        name: "broken",
        template_id: await s.templateId("broken"),
      })
    ).id;
    const failed = await s.waitStatus(id, "failed");
    const build = failed.latest_build!;
    expect(build).toMatchObject({ transition: "start", status: "failed" });
    expect(build.error).toMatch(/terraform apply exited with code 1/);
    const log = (await s.raw("GET", `/api/v1/workspaces/${id}/builds/${build.id}/logs`)).text;
    expect(log).toContain("boom");
    expect(log).toContain("token=[redacted]");
    expect(log).toContain("TF_VAR_tether_workspace_id");
    expect(log).not.toContain(SERVER_SECRET);
    expect(log).not.toContain("ANTHROPIC_API_KEY");

    // A message to its chat starts it again (reason chat); that start fails too.
    const chat = await s.chat(id, "$ echo never");
    const ended = await s.settle(chat);
    expect(ended.status).toBe("error");
    const c = await s.api<{ last_error: { message: string } }>("GET", `/api/v1/chats/${chat}`);
    const builds = await s.builds(id);
    expect(builds[0]).toMatchObject({ transition: "start", reason: "chat", status: "failed" });
    expect(c.last_error.message).toContain(`build ${builds[0]!.id} failed`);
    expect(toolResults(ended.messages)).toEqual([]);

    expect((await s.raw("POST", `/api/v1/workspaces/${id}/start`)).status).toBe(202);
    expect((await s.builds(id))[0]).toMatchObject({ transition: "start", reason: "user" });
  }, 120_000);
});
