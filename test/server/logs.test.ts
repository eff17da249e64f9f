// No secret in any log: a real server (PGlite, its local agent, the demo model) is driven
// through every failure path a test can provoke — bad bytes in a model key's or a
// workspace token's request, inserts and updates the database refuses, a commit of the worker
// that fails — and its whole log is searched for each secret the requests carried.

import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type RunningServer } from "../../src/cli/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-logs-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

const secret = (what: string) => `${what}-${randomBytes(6).toString("hex")}`;

async function request(
  server: RunningServer,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(new URL(route, server.url), {
    method,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function waitFor(what: string, cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not in ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("the server log", () => {
  it("holds no model key, agent token or command output after every failure path a test can provoke", async () => {
    const dataDir = path.join(await tempDir(), "data");
    const ws = await tempDir();
    const lines: string[] = [];
    const server = await startServer({
      listen: "127.0.0.1:0",
      dataDir,
      workspaceDir: ws,
      localWorkspace: true,
      model: "demo",
      logDestination: { write: (s: string) => void lines.push(s) },
    });
    cleanups.push(() => server.close());
    const first = await request(server, undefined, "POST", "/api/v1/users/first", {
      email: "a@b.c",
      password: "correct horse battery",
    });
    const token = first.body.token as string;
    const secrets: string[] = [];
    const s = (what: string) => {
      const v = secret(what);
      secrets.push(v);
      return v;
    };

    // Bad bytes beside a secret: whatever the answer (a 400 once input is checked), no log
    // line may hold the secret.
    const nulModel = await request(server, token, "POST", "/api/v1/models", {
      provider: "openai",
      model: "gpt\u0000x",
      api_key: s("sk-nul-model"),
    });
    expect(nulModel.status).toBeGreaterThanOrEqual(400);
    const nulWorkspace = await request(server, token, "POST", "/api/v1/workspaces", {
      name: "w\u0000",
      agent_url: "http://127.0.0.1:9",
      agent_token: s("tok-nul-name"),
    });
    expect(nulWorkspace.status).toBeGreaterThanOrEqual(400);
    const ok = await request(server, token, "POST", "/api/v1/workspaces", {
      name: "fine",
      agent_url: "http://127.0.0.1:9",
      agent_token: s("tok-fine"),
    });
    expect(ok.status).toBe(201);
    const nulPatch = await request(
      server,
      token,
      "PATCH",
      `/api/v1/workspaces/${String(ok.body.id)}`,
      {
        name: "n\u0000",
        agent_token: s("tok-nul-patch"),
      },
    );
    expect(nulPatch.status).toBeGreaterThanOrEqual(400);

    // Inserts and updates the database refuses, answered 500 and logged.
    await server.db.exec(`
      ALTER TABLE model_configs ADD CONSTRAINT test_refused CHECK (model <> 'refused-model');
      ALTER TABLE workspaces ADD CONSTRAINT test_refused CHECK (name <> 'refused-ws');
    `);
    const refusedModel = await request(server, token, "POST", "/api/v1/models", {
      provider: "openai",
      model: "refused-model",
      api_key: s("sk-refused-insert"),
    });
    expect(refusedModel.status).toBe(500);
    const refusedWorkspace = await request(server, token, "POST", "/api/v1/workspaces", {
      name: "refused-ws",
      agent_url: "http://127.0.0.1:9",
      agent_token: s("tok-refused-insert"),
    });
    expect(refusedWorkspace.status).toBe(500);
    const refusedPatch = await request(
      server,
      token,
      "PATCH",
      `/api/v1/workspaces/${String(ok.body.id)}`,
      {
        name: "refused-ws",
        agent_token: s("tok-refused-update"),
      },
    );
    expect(refusedPatch.status).toBe(500);
    expect(lines.filter((l) => l.includes('"request failed"')).length).toBeGreaterThanOrEqual(3);

    // A commit of the worker that fails: the tool result holds the command's output (here a
    // secret the command printed), and the database refuses it.
    const printed = s("out-secret");
    const [a, b] = [printed.slice(0, 5), printed.slice(5)];
    await server.db.exec(
      `ALTER TABLE chat_messages ADD CONSTRAINT test_refused CHECK (content::text NOT LIKE '%${printed}%')`,
    );
    const chat = await request(server, token, "POST", "/api/v1/chats", {
      message: `$ printf '%s%s' '${a}' '${b}'`,
    });
    expect(chat.status).toBe(201);
    await waitFor(
      "the worker logs the failed commit",
      () => lines.some((l) => l.includes(String(chat.body.id)) && /"level":(40|50)/.test(l)),
      30_000,
    );

    const log = lines.join("");
    for (const v of secrets) expect(log, v).not.toContain(v);
    // The lines still say what failed.
    expect(log).toContain("23514");
  }, 60_000);
});
