// A chat stops using a workspace its owner may no longer use: once the workspace's owner unshares
// it (or repoints it, which unshares it) or an admin disables the chat's owner, the chat's next
// tool calls are not sent — they get `not_run` saying why, nothing new runs on the agent, and the
// turn ends with last_error — while the owner's own chats go on and an interrupt still reaches
// the agent. Real worker, real agents, the fake provider, the API.

import { randomInt } from "node:crypto";
import { access, writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { startTestApi, type TestApi } from "../../src/api/test-support.ts";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { startTestAgent, until, type TestAgent } from "../support/agent.ts";
import { results, settle, testWorker, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { cleanup } = useLoops();
/** A few seconds each, more for the file's first (it loads the SDK and the agent). */
const TEST_TIMEOUT_MS = 40_000;

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

interface Env {
  api: TestApi;
  agent: TestAgent;
  fake: FakeProvider;
  /** The admin's workspace on `agent`, shared. */
  workspaceId: string;
}

describeDatabases("a workspace its chat's owner may no longer use", (db) => {
  async function env(
    o: { startWorker?: boolean } = {},
  ): Promise<Env & { startWorker(): Promise<void> }> {
    const api = await startTestApi(db());
    cleanup.push(() => api.app.close());
    const agent = await startTestAgent();
    cleanup.push(() => agent.close());
    const fake = await startFakeProvider();
    cleanup.push(() => fake.close());
    const model = await api.request("POST", "/api/v1/models", {
      token: api.adminToken,
      body: {
        provider: "openai-compatible",
        model: "fake-model",
        base_url: fake.url,
        is_default: true,
      },
    });
    expect(model.status).toBe(201);
    const ws = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "admins", agent_url: agent.url },
    });
    expect(ws.status).toBe(201);
    const workspaceId = ws.body.id as string;
    await patchWorkspace(api, workspaceId, { shared: true });
    const startWorker = async () => {
      const worker = testWorker(db(), { buffer: api.buffer, feed: api.feed });
      await worker.start();
      cleanup.push(() => worker.stop());
    };
    if (o.startWorker !== false) await startWorker();
    return { api, agent, fake, workspaceId, startWorker };
  }

  async function patchWorkspace(api: TestApi, id: string, body: Record<string, unknown>) {
    const r = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.adminToken,
      body,
    });
    expect(r.status).toBe(200);
  }

  async function newChat(e: Env, token: string, message: string): Promise<string> {
    const r = await e.api.request("POST", "/api/v1/chats", {
      token,
      body: { workspace_id: e.workspaceId, message },
    });
    expect(r.status).toBe(201);
    return r.body.id as string;
  }

  /** A command that runs for a few seconds, recognisable among the agent's processes. */
  function longCommand(): { command: string; running: (a: TestAgent) => boolean } {
    const d = `3.${randomInt(100_000, 999_999)}`;
    return {
      command: `sleep ${d} && echo long > long.txt`,
      running: (a) => a.allProcesses().some((p) => p.command.includes(d) && p.running),
    };
  }

  /**
   * The member's chat runs a long command (running when this resolves); the model's next step
   * asks for `touch marker.txt`.
   */
  async function memberRunsLongCommand(e: Env, message: string) {
    const long = longCommand();
    e.fake.script(
      {
        toolCalls: [{ id: "a", name: "execute", args: { command: long.command, timeout: "30s" } }],
      },
      { toolCalls: [{ id: "b", name: "execute", args: { command: "touch marker.txt" } }] },
    );
    const chatId = await newChat(e, e.api.memberToken, message);
    await until(() => long.running(e.agent), 10_000);
    return { long, chatId };
  }

  const commands = (a: TestAgent) => a.allProcesses().map((p) => p.command);

  it(
    "unshared while a member's command runs: the member's next call is not run, nothing new runs there, the turn ends in error; the owner's own chat still runs",
    async () => {
      const e = await env();
      const { long, chatId } = await memberRunsLongCommand(e, "build it");
      await patchWorkspace(e.api, e.workspaceId, { shared: false });
      expect(long.running(e.agent)).toBe(true); // unshared while it ran

      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("error");
      expect(chat.lastError).toEqual({
        message:
          "The chat's workspace is no longer shared with you, so the chat stopped before its next tool call.",
        detail: "Start a new chat on a workspace of your own, or ask an admin to share it again.",
      });
      const [first, second] = results(history);
      // The command that was running when it was unshared finishes with its real result.
      expect(first).toMatchObject({ status: "completed", exit_code: 0 });
      expect(second).toEqual({
        status: "not_run",
        reason: "workspace_unavailable",
        note: expect.stringContaining("no longer available to the chat's owner") as unknown,
      });
      expect(await exists(path.join(e.agent.dir, "long.txt"))).toBe(true);
      expect(await exists(path.join(e.agent.dir, "marker.txt"))).toBe(false);
      expect(commands(e.agent).some((c) => c.includes("marker"))).toBe(false);
      // The model was not asked again after the refusal.
      expect(e.fake.requests).toHaveLength(2);

      // The owner's own chat on the same workspace runs as before.
      e.fake.script(
        { toolCalls: [{ id: "c", name: "execute", args: { command: "echo mine > own.txt" } }] },
        { text: "done" },
      );
      const own = await newChat(e, e.api.adminToken, "mine");
      const mine = await settle(db(), own);
      expect(mine.chat.status).toBe("waiting");
      expect(results(mine.history)).toEqual([expect.objectContaining({ status: "completed" })]);
      expect(await exists(path.join(e.agent.dir, "own.txt"))).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "repointed (which unshares it) with a message queued: the queued turn sends nothing to either agent",
    async () => {
      const e = await env();
      const other = await startTestAgent();
      cleanup.push(() => other.close());
      const long = longCommand();
      e.fake.script(
        {
          toolCalls: [
            { id: "a", name: "execute", args: { command: long.command, timeout: "30s" } },
          ],
        },
        { text: "first turn done" },
        {
          toolCalls: [
            { id: "b", name: "execute", args: { command: "touch queued.txt" } },
            { id: "c", name: "write_file", args: { path: "written.txt", content: "x" } },
          ],
        },
      );
      const chatId = await newChat(e, e.api.memberToken, "first");
      await until(() => long.running(e.agent), 10_000);
      const queued = await e.api.request("POST", `/api/v1/chats/${chatId}/messages`, {
        token: e.api.memberToken,
        body: { text: "then this" },
      });
      expect(queued.body).toMatchObject({ queued: true });
      await patchWorkspace(e.api, e.workspaceId, { agent_url: other.url });

      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("error");
      expect(chat.lastError?.message).toContain("no longer shared with you");
      expect(results(history)).toEqual([
        expect.objectContaining({ status: "completed" }),
        expect.objectContaining({ status: "not_run", reason: "workspace_unavailable" }),
        expect.objectContaining({ status: "not_applied", reason: "workspace_unavailable" }),
      ]);
      for (const a of [e.agent, other]) {
        expect(await exists(path.join(a.dir, "queued.txt"))).toBe(false);
        expect(await exists(path.join(a.dir, "written.txt"))).toBe(false);
      }
      expect(commands(other)).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "a disabled owner's chat sends no more tool calls",
    async () => {
      const e = await env();
      const { chatId } = await memberRunsLongCommand(e, "go");
      const off = await e.api.request("PATCH", `/api/v1/users/${e.api.memberId}`, {
        token: e.api.adminToken,
        body: { disabled: true },
      });
      expect(off.status).toBe(200);

      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("error");
      expect(chat.lastError?.message).toContain("owner is disabled");
      expect(results(history)[1]).toMatchObject({
        status: "not_run",
        reason: "workspace_unavailable",
      });
      expect(await exists(path.join(e.agent.dir, "marker.txt"))).toBe(false);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "an interrupt after the unshare still reaches the agent and kills the running command",
    async () => {
      const e = await env();
      const long = longCommand();
      e.fake.script({
        toolCalls: [{ id: "a", name: "execute", args: { command: long.command, timeout: "30s" } }],
      });
      const chatId = await newChat(e, e.api.memberToken, "go");
      await until(() => long.running(e.agent), 10_000);
      await patchWorkspace(e.api, e.workspaceId, { shared: false });
      const stop = await e.api.request("POST", `/api/v1/chats/${chatId}/interrupt`, {
        token: e.api.memberToken,
      });
      expect(stop.status).toBe(202);

      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("waiting");
      expect(results(history)).toEqual([expect.objectContaining({ status: "canceled" })]);
      expect(long.running(e.agent)).toBe(false);
      expect(await exists(path.join(e.agent.dir, "long.txt"))).toBe(false);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "unshared before the chat's first step: the workspace is not read for the prompt, and the call is not run",
    async () => {
      const e = await env({ startWorker: false });
      await writeFile(path.join(e.agent.dir, "AGENTS.md"), "the admin's project rules\n");
      e.fake.script({
        toolCalls: [{ id: "a", name: "execute", args: { command: "touch marker.txt" } }],
      });
      const chatId = await newChat(e, e.api.memberToken, "go");
      await patchWorkspace(e.api, e.workspaceId, { shared: false });
      await e.startWorker();

      const { chat, history } = await settle(db(), chatId);
      expect(chat.status).toBe("error");
      expect(results(history)).toEqual([
        expect.objectContaining({ status: "not_run", reason: "workspace_unavailable" }),
      ]);
      expect(await exists(path.join(e.agent.dir, "marker.txt"))).toBe(false);
      // No snapshot of the workspace was taken or kept, and the prompt says why.
      const view = await e.api.request("GET", `/api/v1/chats/${chatId}`, {
        token: e.api.memberToken,
      });
      expect(view.body.context).toBeNull();
      const prompt = JSON.stringify(e.fake.requests[0]!.messages);
      expect(prompt).not.toContain("the admin's project rules");
      expect(prompt).toContain("no longer available to the chat's owner");
    },
    TEST_TIMEOUT_MS,
  );
});
