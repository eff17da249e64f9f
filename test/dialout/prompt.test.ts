// A full chat through a dial-out workspace with a context snapshot (issue 13, docs/prompt.md):
// a real server (in-process; its embedded PGlite, or a fresh database on the test Postgres)
// whose worker calls the fake provider server, and a `bin/tether agent --server` process that
// dials it with its token in TETHER_AGENT_TOKEN, serving a workspace that holds AGENTS.md. The
// model's prompt carries the environment block and the instruction files the agent read over
// that connection; the snapshot holds until it is refreshed through the API.

import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { generateSecretKey } from "../../src/chatd/secrets/index.ts";
import { startServer, type RunningServer } from "../../src/cli/server.ts";
import { results, settle } from "../support/chatd.ts";
import { createScratchDatabase, testDatabaseUrl } from "../support/db.ts";
import { registerDialoutWorkspace, startAgentProcess } from "../support/dialout.ts";
import { startFakeProvider, type FakeChatRequest } from "../support/fake-provider.ts";
import { waitFor } from "../support/replicas.ts";
import { api } from "../support/server.ts";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
}, 60_000);

const systemOf = (r: FakeChatRequest) => {
  const c = (r.messages as { content?: unknown }[])[0]?.content;
  return typeof c === "string" ? c : JSON.stringify(c ?? "");
};

/** A fresh database on the test Postgres for one server, dropped afterwards. */
async function freshPostgres(): Promise<string> {
  const scratch = await createScratchDatabase(testDatabaseUrl()!, "tether_dialout_prompt");
  cleanups.push(() => scratch.drop());
  return scratch.url;
}

const kinds = ["pglite", "postgres"] as const;

describe.each(kinds)("a chat through a dial-out workspace (%s)", (kind) => {
  it.skipIf(kind === "postgres" && testDatabaseUrl() === undefined)(
    "the model's prompt carries the agent's environment and AGENTS.md; the snapshot holds until refreshed",
    async () => {
      const home = await mkdtemp(path.join(os.tmpdir(), "tether-dialout-prompt-"));
      cleanups.push(() => rm(home, { recursive: true, force: true }));
      const dir = path.join(home, "workspace");
      const agentHome = path.join(home, "agent-home");
      await mkdir(path.join(dir, ".git"), { recursive: true });
      await writeFile(path.join(dir, ".git", "HEAD"), "ref: refs/heads/dial-out\n");
      await writeFile(path.join(dir, "AGENTS.md"), "Answer in haiku.\n");
      await mkdir(path.join(agentHome, ".tether"), { recursive: true });
      await writeFile(path.join(agentHome, ".tether", "AGENTS.md"), "Sign every answer.\n");

      const fake = await startFakeProvider();
      cleanups.push(() => fake.close());
      const server: RunningServer = await startServer({
        listen: "127.0.0.1:0",
        dataDir: path.join(home, "data"),
        ...(kind === "postgres" && {
          postgresUrl: await freshPostgres(),
          secretKey: generateSecretKey(),
        }),
        workspaceDir: dir,
        localWorkspace: false,
        model: "openai-compatible:fake-model",
        modelBaseUrl: fake.url,
        log: false,
        agentAnswerTimeoutMs: 5_000,
        agentHub: { routePollMs: 50, reconcileMs: 200 },
      });
      cleanups.push(() => server.close());
      const { token } = await api<{ token: string }>(
        server.url,
        undefined,
        "POST",
        "/api/v1/users/first",
        { email: "dialout-prompt@example.com", password: "correct horse battery" },
      );
      const reg = await registerDialoutWorkspace(server.db);
      const agent = startAgentProcess(
        { server: server.url, dir, token: reg.token, env: { HOME: agentHome } },
        (f) => cleanups.push(f),
      );
      await agent.connected();
      // Past the contract's 2 s age margin, so the model's tool call runs at once.
      await waitFor("the agent to be past its age margin", async () => {
        const s = await server.agents.agentStatus(reg.workspaceId);
        return s.connected && s.uptimeMs > 2_500;
      });

      fake.script(
        { toolCalls: [{ id: "r", name: "read_file", args: { path: "AGENTS.md" } }] },
        { text: "Read." },
      );
      const chat = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
        workspace_id: reg.workspaceId,
        message: "read the rules",
      });
      const first = await settle(server.db, chat.id, 20_000);
      expect(first.chat.status).toBe("waiting");
      expect(fake.requests).toHaveLength(2);
      const system = systemOf(fake.requests[0]!);
      expect(system).toContain(`- Workspace directory: ${dir}`);
      expect(system).toContain(`- OS: ${process.platform} (${process.arch})`);
      expect(system).toMatch(/- Shell: \S+/);
      expect(system).toMatch(/- Date: \d{4}-\d{2}-\d{2}/);
      expect(system).toContain("- Git: a git repository, branch dial-out");
      expect(system).toContain(`## ${path.join(dir, "AGENTS.md")}\n\nAnswer in haiku.`);
      expect(system).toContain(
        `## ${path.join(agentHome, ".tether", "AGENTS.md")}\n\nSign every answer.`,
      );
      // Every step of the chat sends the same prompt; the relative path ran over the connection.
      expect(systemOf(fake.requests[1]!)).toBe(system);
      expect(results(first.history)).toEqual([
        expect.objectContaining({
          status: "completed",
          path: path.join(dir, "AGENTS.md"),
          content: "1\tAnswer in haiku.",
        }),
      ]);
      const view = await api<{ context: Record<string, unknown> }>(
        server.url,
        token,
        "GET",
        `/api/v1/chats/${chat.id}`,
      );
      expect(view.context).toMatchObject({
        directory: dir,
        files: [
          { path: path.join(dir, "AGENTS.md"), bytes: 17, truncated: false },
          { path: path.join(agentHome, ".tether", "AGENTS.md"), bytes: 19, truncated: false },
        ],
      });

      // AGENTS.md changes: the chat's prompt does not, until the owner refreshes it.
      await writeFile(path.join(dir, "AGENTS.md"), "Answer in prose.\n");
      fake.script({ text: "Again." });
      await api(server.url, token, "POST", `/api/v1/chats/${chat.id}/messages`, {
        text: "again",
      });
      await waitFor("the second turn", () => fake.requests.length === 3);
      await settle(server.db, chat.id, 20_000);
      expect(systemOf(fake.requests[2]!)).toContain("Answer in haiku.");
      await api(server.url, token, "POST", `/api/v1/chats/${chat.id}/refresh-context`);
      fake.script({ text: "Prose." });
      await api(server.url, token, "POST", `/api/v1/chats/${chat.id}/messages`, {
        text: "and again",
      });
      await waitFor("the third turn", () => fake.requests.length === 4);
      await settle(server.db, chat.id, 20_000);
      const refreshed = systemOf(fake.requests[3]!);
      expect(refreshed).toContain("Answer in prose.");
      expect(refreshed).not.toContain("haiku");
    },
    120_000,
  );
});
