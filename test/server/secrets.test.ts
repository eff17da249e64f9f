// Secrets at rest are encrypted: a model key and an agent token configured through the API are
// nowhere in the embedded database's files (nor in a dump of a Postgres database), yet both
// work, after a restart too; plaintext rows of an older database are sealed at start; a new key
// with the old one set re-seals everything; Postgres without a key refuses to start. A template
// workspace's Terraform state (which holds what its resources hold) is sealed the same way.

import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/chatd/db/index.ts";
import {
  createSecretBox,
  generateSecretKey,
  parseSecretKey,
  secretKeyId,
  SLOTS,
} from "../../src/chatd/secrets/index.ts";
import { startServer, type RunningServer, type ServerOptions } from "../../src/cli/server.ts";
import { useAgents } from "../support/agent.ts";
import { createScratchDatabase, testDatabaseUrl } from "../support/db.ts";
import { startFakeProvider, type FakeProvider } from "../support/fake-provider.ts";
import { BIN } from "../support/server.ts";
import { terraformAvailable } from "../support/workspaces.ts";

const HAS_TERRAFORM = terraformAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the Terraform state sealing test is skipped.");

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const startAgent = useAgents();

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-secrets-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

const secret = (what: string) => `${what}-${randomBytes(8).toString("hex")}`;

/** The files under `dir` that hold any of `needles` (as bytes, anywhere in the file). */
async function filesHolding(dir: string, needles: string[]): Promise<string[]> {
  const found: string[] = [];
  const walk = async (p: string): Promise<void> => {
    const st = await lstat(p);
    if (st.isDirectory()) {
      for (const n of await readdir(p)) await walk(path.join(p, n));
    } else if (st.isFile()) {
      const bytes = await readFile(p);
      for (const n of needles) if (bytes.includes(n)) found.push(`${n} in ${p}`);
    }
  };
  await walk(dir);
  return found;
}

async function api<T = Record<string, unknown>>(
  server: RunningServer,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(new URL(route, server.url), {
    method,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : {}) as T;
}

async function start(o: Partial<ServerOptions> & { dataDir: string }): Promise<RunningServer> {
  const server = await startServer({
    listen: "127.0.0.1:0",
    workspaceDir: o.dataDir,
    localWorkspace: false,
    log: false,
    ...o,
  });
  let closed = false;
  cleanups.push(() => (closed ? undefined : server.close()));
  const close = server.close.bind(server);
  server.close = async (c) => {
    closed = true;
    await close(c);
  };
  return server;
}

/** A chat that runs `echo` in the workspace through the fake model; resolves with its result. */
async function runsEcho(
  server: RunningServer,
  token: string,
  fake: FakeProvider,
  ids: { workspace_id: string; model_id: string },
): Promise<unknown> {
  const word = `sealed-${randomBytes(3).toString("hex")}`;
  fake.script(
    { toolCalls: [{ id: `call_${word}`, name: "execute", args: { command: `echo ${word}` } }] },
    { text: "done" },
  );
  const chat = await api<{ id: string }>(server, token, "POST", "/api/v1/chats", {
    ...ids,
    message: "go",
  });
  const end = Date.now() + 30_000;
  for (;;) {
    const c = await api<{ status: string }>(server, token, "GET", `/api/v1/chats/${chat.id}`);
    if (c.status === "waiting" || c.status === "error") break;
    if (Date.now() > end) throw new Error("the chat did not finish");
    await new Promise((r) => setTimeout(r, 100));
  }
  const { messages } = await api<{ messages: { parts: { type: string; result?: unknown }[] }[] }>(
    server,
    token,
    "GET",
    `/api/v1/chats/${chat.id}/messages`,
  );
  const result = messages.flatMap((m) => m.parts).find((p) => p.type === "tool-result")?.result;
  expect(result).toMatchObject({ status: "completed", output: `${word}\n` });
  return result;
}

/** Configures the fake model with `apiKey` and a workspace on `agentUrl` with `agentToken`. */
async function configure(
  server: RunningServer,
  fake: FakeProvider,
  o: { apiKey: string; agentUrl: string; agentToken: string },
) {
  const { token } = await api<{ token: string }>(server, undefined, "POST", "/api/v1/users/first", {
    email: "a@b.c",
    password: "correct horse battery",
  });
  const model = await api<{ id: string }>(server, token, "POST", "/api/v1/models", {
    provider: "openai-compatible",
    model: "fake-model",
    base_url: fake.url,
    api_key: o.apiKey,
  });
  const workspace = await api<{ id: string }>(server, token, "POST", "/api/v1/workspaces", {
    name: "w",
    agent_url: o.agentUrl,
    agent_token: o.agentToken,
  });
  return { token, ids: { workspace_id: workspace.id, model_id: model.id } };
}

describe("secrets at rest", () => {
  it("a configured model key and agent token are nowhere in the data dir, and both work, after a restart too", async () => {
    const fake = await startFakeProvider();
    cleanups.push(() => fake.close());
    const apiKey = secret("sk-model");
    const agentToken = secret("agent-token");
    const agent = await startAgent({ token: agentToken });
    const dataDir = path.join(await tempDir(), "data");

    const first = await start({ dataDir });
    const { token, ids } = await configure(first, fake, {
      apiKey,
      agentUrl: agent.url,
      agentToken,
    });
    await runsEcho(first, token, fake, ids);
    expect(fake.authorizations).toContain(`Bearer ${apiKey}`);
    await first.close();
    expect(await filesHolding(dataDir, [apiKey, agentToken])).toEqual([]);

    const second = await start({ dataDir });
    fake.authorizations.length = 0;
    await runsEcho(second, token, fake, ids);
    expect(fake.authorizations).toContain(`Bearer ${apiKey}`);
    await second.close();
    expect(await filesHolding(dataDir, [apiKey, agentToken])).toEqual([]);
  }, 120_000);

  it("plaintext rows of an older database are sealed at the first start, and keep working", async () => {
    const fake = await startFakeProvider();
    cleanups.push(() => fake.close());
    const apiKey = secret("sk-old-plaintext");
    const agentToken = secret("old-agent-token");
    const agent = await startAgent({ token: agentToken });
    const dataDir = path.join(await tempDir(), "data");
    await mkdir(dataDir);
    const old = await openDatabase({ dataDir: path.join(dataDir, "db") });
    await old.query(
      "INSERT INTO model_configs (id, provider, model, base_url, api_key, is_default) VALUES (gen_random_uuid(), 'openai-compatible', 'fake-model', $1, $2, true)",
      [fake.url, apiKey],
    );
    await old.query(
      "INSERT INTO workspaces (id, name, agent_url, agent_token, is_default, shared) VALUES (gen_random_uuid(), 'old', $1, $2, true, true)",
      [agent.url, agentToken],
    );
    await old.close();

    const server = await start({ dataDir });
    const rows = await server.db.query<{ api_key: string; agent_token: string }>(
      "SELECT api_key, agent_token FROM model_configs, workspaces",
    );
    expect(rows.rows).toHaveLength(1);
    expect(JSON.stringify(rows.rows)).not.toContain(apiKey);
    expect(JSON.stringify(rows.rows)).not.toContain(agentToken);
    const { token } = await api<{ token: string }>(
      server,
      undefined,
      "POST",
      "/api/v1/users/first",
      {
        email: "a@b.c",
        password: "correct horse battery",
      },
    );
    const ids = {
      workspace_id: (await server.db.query<{ id: string }>("SELECT id FROM workspaces")).rows[0]!
        .id,
      model_id: (await server.db.query<{ id: string }>("SELECT id FROM model_configs")).rows[0]!.id,
    };
    await runsEcho(server, token, fake, ids);
    expect(fake.authorizations).toContain(`Bearer ${apiKey}`);
    await server.close();
    // The old bytes are gone from the tables' files and the WAL too, not only from the live rows.
    expect(await filesHolding(dataDir, [apiKey, agentToken])).toEqual([]);
  }, 120_000);

  it("rotation: a new key with the old one set re-seals everything; then the new key alone opens it", async () => {
    const fake = await startFakeProvider();
    cleanups.push(() => fake.close());
    const apiKey = secret("sk-rotated");
    const agentToken = secret("rotated-token");
    const agent = await startAgent({ token: agentToken });
    const dataDir = path.join(await tempDir(), "data");
    const [a, b] = [generateSecretKey(), generateSecretKey()];

    const first = await start({ dataDir, secretKey: a });
    const { token, ids } = await configure(first, fake, {
      apiKey,
      agentUrl: agent.url,
      agentToken,
    });
    await first.close();

    // Without the old key, nothing it sealed opens: the replica secret refuses the start.
    await expect(start({ dataDir, secretKey: b })).rejects.toThrow(/TETHER_SECRET_KEY_OLD/);

    const rotating = await start({ dataDir, secretKey: b, oldSecretKeys: a });
    const sealed = await rotating.db.query<{ v: string }>(
      `SELECT api_key AS v FROM model_configs WHERE api_key IS NOT NULL
       UNION ALL SELECT agent_token FROM workspaces UNION ALL SELECT secret FROM replica_secret`,
    );
    const newId = secretKeyId(parseSecretKey(b, "b"));
    expect(sealed.rows.map((r) => r.v.split(":")[1])).toEqual([newId, newId, newId]);
    await rotating.close();

    const after = await start({ dataDir, secretKey: b });
    await runsEcho(after, token, fake, ids);
    expect(fake.authorizations).toContain(`Bearer ${apiKey}`);
    await after.close();
  }, 120_000);

  it.skipIf(!HAS_TERRAFORM)(
    "a workspace's Terraform state is nowhere in the data dir; rotation re-seals it and the next build reads it",
    async () => {
      const dataDir = path.join(await tempDir(), "data");
      const [a, b] = [generateSecretKey(), generateSecretKey()];
      // The home holds a value Terraform computes, which only the state holds (the template has
      // the expression, not its value); the compute (count) holds the agent token. Both are
      // sensitive: the build log holds what Terraform prints, and it prints other values.
      const salt = secret("salt");
      const mainTf = [
        'variable "tether_workspace_id" { type = string }',
        'variable "tether_start_count" { type = number }',
        'variable "tether_agent_token" {',
        "  type      = string",
        "  sensitive = true",
        "}",
        'resource "terraform_data" "home" {',
        `  input = sensitive(sha256("\${var.tether_workspace_id}/${salt}"))`,
        "}",
        'resource "terraform_data" "compute" {',
        "  count = var.tether_start_count",
        "  input = var.tether_agent_token",
        "}",
      ].join("\n");
      type Ws = { latest_build: { id: string; status: string; transition: string } | null };
      const settled = async (server: RunningServer, token: string, id: string, t: string) => {
        const end = Date.now() + 90_000;
        for (;;) {
          const w = await api<Ws>(server, token, "GET", `/api/v1/workspaces/${id}`);
          const b = w.latest_build;
          if (b?.transition === t && (b.status === "succeeded" || b.status === "failed")) return b;
          if (Date.now() > end) throw new Error(`the ${t} build did not finish`);
          await new Promise((r) => setTimeout(r, 200));
        }
      };
      const stateKeyId = async (server: RunningServer) => {
        const r = await server.db.query<{ state: string }>("SELECT state FROM workspace_states");
        expect(r.rows).toHaveLength(1);
        return r.rows[0]!.state.split(":")[1];
      };

      const first = await start({ dataDir, secretKey: a });
      const { token } = await api<{ token: string }>(
        first,
        undefined,
        "POST",
        "/api/v1/users/first",
        { email: "a@b.c", password: "correct horse battery" },
      );
      const template = await api<{ id: string }>(first, token, "POST", "/api/v1/templates", {
        name: "sealed",
        files: { "main.tf": mainTf },
        default_ttl_ms: 0,
      });
      const ws = await api<{ id: string }>(first, token, "POST", "/api/v1/workspaces", {
        name: "sealed",
        template_id: template.id,
      });
      expect(await settled(first, token, ws.id, "start")).toMatchObject({ status: "succeeded" });
      expect(await stateKeyId(first)).toBe(secretKeyId(parseSecretKey(a, "a")));
      // What the state holds, opened with the key: the computed value and the agent token.
      const stored = await first.db.query<{ state: string }>("SELECT state FROM workspace_states");
      const box = createSecretBox({ current: parseSecretKey(a, "a") });
      const state = box.open(stored.rows[0]!.state, SLOTS.workspaceState(ws.id));
      const computed = createHash("sha256").update(`${ws.id}/${salt}`).digest("hex");
      const agentToken = (
        JSON.parse(state) as {
          resources: {
            name: string;
            instances: { attributes: { output: { value: string } } }[];
          }[];
        }
      ).resources.find((r) => r.name === "compute")!.instances[0]!.attributes.output.value;
      expect(state).toContain(computed);
      expect(agentToken.length).toBeGreaterThan(20);
      const inState = [computed, agentToken];
      await first.close();
      expect(await filesHolding(dataDir, inState)).toEqual([]);

      // A new key with the old one set: the state is sealed again with the new key.
      const rotating = await start({ dataDir, secretKey: b, oldSecretKeys: a });
      expect(await stateKeyId(rotating)).toBe(secretKeyId(parseSecretKey(b, "b")));
      await rotating.close();

      // The new key alone opens it: the stop build starts from the saved state, so Terraform
      // knows the compute it made and destroys it.
      const after = await start({ dataDir, secretKey: b });
      await api(after, token, "POST", `/api/v1/workspaces/${ws.id}/stop`);
      const stop = await settled(after, token, ws.id, "stop");
      const res = await fetch(
        new URL(`/api/v1/workspaces/${ws.id}/builds/${stop.id}/logs`, after.url),
        { headers: { authorization: `Bearer ${token}` } },
      );
      const log = await res.text();
      expect(stop.status, log).toBe("succeeded");
      expect(log).toMatch(/terraform_data\.compute\[0\]: Destr/);
      expect(log).not.toMatch(/terraform_data\.home: Creat/);
      // The stop's plan printed the (now revoked) token as terraform_data's output, which
      // Terraform does not mark sensitive: the log has it scrubbed.
      expect(log).toContain('output = "[redacted]"');
      await after.close();
      expect(await filesHolding(dataDir, inState)).toEqual([]);
    },
    180_000,
  );

  it("a server on Postgres without a key refuses to start, with the command that makes one", async () => {
    const env = { ...process.env };
    delete env.TETHER_SECRET_KEY;
    const proc = spawn(
      BIN,
      [
        "server",
        "--listen",
        "127.0.0.1:0",
        "--no-local-workspace",
        "--data-dir",
        path.join(await tempDir(), "data"),
      ],
      { env: { ...env, TETHER_POSTGRES_URL: "postgres://nobody@127.0.0.1:1/none" } },
    );
    let stderr = "";
    proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise((r) => proc.once("exit", r));
    expect(code).toBe(2);
    expect(stderr).toContain("needs a secret key");
    expect(stderr).toContain("openssl rand -base64 32");
  }, 60_000);

  describe.skipIf(!testDatabaseUrl())("on Postgres", () => {
    it("a dump of the database holds no configured model key or agent token", async () => {
      const scratch = await createScratchDatabase(testDatabaseUrl()!, "tether_secrets");
      cleanups.push(() => scratch.drop());
      const url = new URL(scratch.url);
      const fake = await startFakeProvider();
      cleanups.push(() => fake.close());
      const apiKey = secret("sk-pg");
      const agentToken = secret("pg-agent-token");
      const agent = await startAgent({ token: agentToken });
      const server = await start({
        dataDir: path.join(await tempDir(), "data"),
        postgresUrl: url.toString(),
        secretKey: generateSecretKey(),
      });
      const { token, ids } = await configure(server, fake, {
        apiKey,
        agentUrl: agent.url,
        agentToken,
      });
      await runsEcho(server, token, fake, ids);
      await server.close();
      const dump = spawnSync("pg_dump", ["--data-only", url.toString()], { encoding: "utf8" });
      expect(dump.status, dump.stderr).toBe(0);
      expect(dump.stdout).toContain("fake-model");
      expect(dump.stdout).not.toContain(apiKey);
      expect(dump.stdout).not.toContain(agentToken);
    }, 120_000);
  });
});
