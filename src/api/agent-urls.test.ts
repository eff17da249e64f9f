// Workspace URLs (issue 11, items 5 and 9): a member registers only agents on public addresses,
// checked at registration and again on every connection (DNS rebinding does not help); errors
// never carry the socket's; answers are capped; credentials in a URL are refused; a new URL
// unshares the workspace and needs the new agent's token, which is all the new host ever gets.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { AgentPool } from "../chatd/agents.ts";
import { ephemeralSecretBox } from "../chatd/secrets/index.ts";
import { AgentAddressRefusedError, MAX_AGENT_ANSWER_BYTES } from "../contract/index.ts";
import { startTestApi, type TestApi } from "./test-support.ts";

/** A stand-in agent that records each request's method, path and Authorization header. */
interface RecordingAgent {
  url: string;
  port: number;
  seen: { path: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

async function startRecordingAgent(
  answer: (path: string, res: http.ServerResponse) => void = defaultAnswer,
): Promise<RecordingAgent> {
  const seen: RecordingAgent["seen"] = [];
  const server = http.createServer((req, res) => {
    seen.push({ path: req.url ?? "", authorization: req.headers.authorization });
    answer(req.url ?? "", res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function defaultAnswer(path: string, res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify(
      path.startsWith("/api/v0/info")
        ? {
            version: "fake",
            api_version: "0",
            tool_calls: true,
            started_at: new Date().toISOString(),
          }
        : { processes: [] },
    ),
  );
}

const NOT_PUBLIC = [
  "http://127.0.0.1:8080",
  "http://localhost:8080",
  "http://10.0.0.5",
  "http://172.16.1.1",
  "http://192.168.1.1",
  "http://169.254.169.254/latest",
  "http://100.64.0.1",
  "http://0.0.0.0:80",
  "http://[::]:80",
  "http://[::1]:80",
  "http://[fe80::1]",
  "http://[fd00:ec2::254]",
  "http://[fc00::1]",
  "http://224.0.0.1",
  "http://[::ffff:127.0.0.1]:80",
  "http://[::ffff:a9fe:a9fe]",
  "http://2130706433", // 127.0.0.1 as one number: the URL parser makes it 127.0.0.1
];

describeDatabases("workspace URLs", (db) => {
  let api: TestApi;
  let agents: RecordingAgent[];
  beforeEach(() => {
    agents = [];
  });
  afterEach(async () => {
    await api.app.close();
    await Promise.all(agents.map((a) => a.close()));
  });
  const agent = async (answer?: Parameters<typeof startRecordingAgent>[0]) => {
    const a = await startRecordingAgent(answer);
    agents.push(a);
    return a;
  };
  const register = (token: string, body: object) =>
    api.request("POST", "/api/v1/workspaces", { token, body });

  it("a member registers only agents on public addresses; loopback, private, link-local, metadata and mapped forms need an admin", async () => {
    api = await startTestApi(db());
    for (const agent_url of NOT_PUBLIC) {
      const r = await register(api.memberToken, { name: "w", agent_url });
      expect(r.status, agent_url).toBe(403);
      expect(r.body.code).toBe("private_agent_address");
    }
    expect((await db().query("SELECT 1 FROM workspaces")).rows).toEqual([]);
    const unresolvable = await register(api.memberToken, {
      name: "w",
      agent_url: "http://no-such-host.invalid",
    });
    expect(unresolvable.body.code).toBe("agent_url_unresolvable");
    // A public address is the member's to register; any address is an admin's.
    const pub = await register(api.memberToken, { name: "w", agent_url: "http://93.184.215.14:9" });
    expect(pub.status).toBe(201);
    const admin = await register(api.adminToken, { name: "w", agent_url: "http://127.0.0.1:8080" });
    expect(admin.status).toBe(201);
    // A member's change to a private URL is refused the same way.
    const patch = await api.request("PATCH", `/api/v1/workspaces/${pub.body.id as string}`, {
      token: api.memberToken,
      body: { agent_url: "http://10.0.0.1" },
    });
    expect(patch.body.code).toBe("private_agent_address");
    const rows = await db().query(
      "SELECT agent_url, url_checked_as FROM workspaces ORDER BY agent_url",
    );
    expect(rows.rows).toEqual([
      { agent_url: "http://127.0.0.1:8080", url_checked_as: "admin" },
      { agent_url: "http://93.184.215.14:9", url_checked_as: "member" },
    ]);
  });

  it("a member's agent is checked again on every connection: a name that resolved to a public address at registration never reaches loopback (DNS rebinding)", async () => {
    // The registration's resolver says public; the connections' (the system's) say 127.0.0.1.
    api = await startTestApi(db(), {
      resolveHost: async () => [{ address: "93.184.215.14", family: 4 }],
      healthTimeoutMs: 1_000,
    });
    const fake = await agent();
    const url = `http://localhost:${fake.port}`;
    const ws = await register(api.memberToken, { name: "rebinding", agent_url: url });
    expect(ws.status).toBe(201);
    const read = await api.request("GET", `/api/v1/workspaces/${ws.body.id as string}`, {
      token: api.memberToken,
    });
    expect(read.body.health).toMatchObject({ reachable: false });
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: ws.body.id },
    });
    const procs = await api.request("GET", `/api/v1/chats/${chat.body.id as string}/processes`, {
      token: api.memberToken,
    });
    expect(procs.status).toBe(502);
    expect(procs.body.code).toBe("agent_unreachable");
    expect(JSON.stringify(procs.body)).not.toContain("127.0.0.1");
    // The worker's tool calls use the same pool and the same check.
    const pool = new AgentPool(db(), { secrets: ephemeralSecretBox() });
    try {
      const client = (await pool.forWorkspace(ws.body.id as string))!;
      await expect(client.info({ timeoutMs: 1_000 })).rejects.toBeInstanceOf(
        AgentAddressRefusedError,
      );
    } finally {
      pool.close();
    }
    expect(fake.seen).toEqual([]);
    // The same URL an admin registers is connected to: the refusal was the policy's.
    const admins = await register(api.adminToken, { name: "admin's", agent_url: url });
    const ok = await api.request("GET", `/api/v1/workspaces/${admins.body.id as string}`, {
      token: api.adminToken,
    });
    expect(ok.body.health).toMatchObject({ reachable: true, version: "fake" });
    expect(fake.seen.length).toBeGreaterThan(0);
  });

  it("an unreachable or hung-up agent is answered as unreachable, never with the socket's error; an answer over the cap is refused", async () => {
    api = await startTestApi(db(), { memberAgentAddresses: () => true, agentTimeoutMs: 2_000 });
    const hangUp = await agent((_path, res) => res.socket?.destroy());
    const huge = await agent((path, res) => {
      if (path.startsWith("/api/v0/info")) return defaultAnswer(path, res);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(Buffer.alloc(MAX_AGENT_ANSWER_BYTES + 1, 0x20));
    });
    const cases: [string, string][] = [
      ["http://127.0.0.1:1", "agent_unreachable"],
      [hangUp.url, "agent_unreachable"],
      [huge.url, "agent_answer_too_large"],
    ];
    for (const [agent_url, code] of cases) {
      const ws = await register(api.memberToken, { name: "w", agent_url });
      const chat = await api.request("POST", "/api/v1/chats", {
        token: api.memberToken,
        body: { workspace_id: ws.body.id },
      });
      const r = await api.request("GET", `/api/v1/chats/${chat.body.id as string}/processes`, {
        token: api.memberToken,
      });
      expect(r.status, agent_url).toBe(502);
      expect(r.body.code).toBe(code);
      const text = JSON.stringify(r.body);
      for (const leak of ["ECONNREFUSED", "127.0.0.1", "socket hang up", ":1", "hang up"])
        expect(text, agent_url).not.toContain(leak);
    }
    expect(huge.seen.map((s) => s.path)).toContain("/api/v0/processes/list");
  });

  it("credentials in an agent URL are refused with a 400 pointing to agent_token, and never stored, audited or shown", async () => {
    api = await startTestApi(db());
    const secret = "pa55word-in-url";
    for (const token of [api.memberToken, api.adminToken]) {
      const r = await register(token, {
        name: "w",
        agent_url: `http://user:${secret}@127.0.0.1:1`,
      });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("agent_url_credentials");
      expect(r.body.message).toContain("agent_token");
    }
    const ws = await register(api.adminToken, { name: "w", agent_url: "http://127.0.0.1:1" });
    const patch = await api.request("PATCH", `/api/v1/workspaces/${ws.body.id as string}`, {
      token: api.adminToken,
      body: { agent_url: `http://${secret}@127.0.0.1:2` },
    });
    expect(patch.body.code).toBe("agent_url_credentials");
    // One stored before this rule (or by the server itself) is never shown with them.
    await db().query(
      `INSERT INTO workspaces (id, name, agent_url) VALUES (gen_random_uuid(), 'old', 'http://u:${secret}@127.0.0.1:3/x')`,
    );
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.adminToken });
    expect((list.body.workspaces as { agent_url: string }[]).map((w) => w.agent_url)).toContain(
      "http://127.0.0.1:3/x",
    );
    const audit = await db().query("SELECT details::text AS d FROM audit_log");
    for (const row of audit.rows) expect(row.d).not.toContain(secret);
    for (const a of api.answers) expect(a).not.toContain(secret);
  });

  it("repointing a shared workspace unshares it and needs the new agent's token; the old token never reaches the new host", async () => {
    api = await startTestApi(db(), { memberAgentAddresses: () => true, healthTimeoutMs: 1_000 });
    const first = await agent();
    const second = await agent();
    const other = await api.request("POST", "/api/v1/users", {
      token: api.adminToken,
      body: { email: "other@example.com", password: "a long password", role: "member" },
    });
    const otherToken = (
      await api.request("POST", "/api/v1/auth/login", {
        body: { email: "other@example.com", password: "a long password" },
      })
    ).body.token as string;
    expect(other.status).toBe(201);
    const ws = await register(api.memberToken, {
      name: "shared",
      agent_url: first.url,
      agent_token: "token-of-the-first-agent",
    });
    const id = ws.body.id as string;
    const share = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.adminToken,
      body: { shared: true },
    });
    expect(share.body.shared).toBe(true);
    const usable = () =>
      api.request("POST", "/api/v1/chats", { token: otherToken, body: { workspace_id: id } });
    expect((await usable()).status).toBe(201);
    await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.memberToken });
    expect(first.seen.map((s) => s.authorization)).toContain("Bearer token-of-the-first-agent");

    // The owner repoints it: without the new agent's token, refused and nothing changes.
    const bare = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.memberToken,
      body: { agent_url: second.url },
    });
    expect(bare.status).toBe(400);
    expect(bare.body.code).toBe("agent_token_required");
    const unchanged = await db().query("SELECT agent_url, shared FROM workspaces WHERE id = $1", [
      id,
    ]);
    expect(unchanged.rows[0]).toEqual({ agent_url: first.url, shared: true });

    const moved = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.memberToken,
      body: { agent_url: second.url, agent_token: "token-of-the-second-agent" },
    });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ agent_url: second.url, shared: false });
    expect((await usable()).status).toBe(404);
    // The new host is reached (health, processes) with its own token, never the old one.
    const read = await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.memberToken });
    expect(read.body.health).toMatchObject({ reachable: true });
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: id },
    });
    expect(
      (
        await api.request("GET", `/api/v1/chats/${chat.body.id as string}/processes`, {
          token: api.memberToken,
        })
      ).status,
    ).toBe(200);
    expect(second.seen.length).toBeGreaterThanOrEqual(2);
    for (const s of second.seen) expect(s.authorization).toBe("Bearer token-of-the-second-agent");
    // An agent without a token: repointing to it says so with agent_token null.
    const tokenless = await agent();
    const none = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.memberToken,
      body: { agent_url: tokenless.url, agent_token: null },
    });
    expect(none.status).toBe(200);
    await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.memberToken });
    for (const s of tokenless.seen) expect(s.authorization).toBeUndefined();
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(audit.body.entries).toContainEqual(
      expect.objectContaining({
        action: "workspace.update",
        details: expect.objectContaining({
          agent_url: second.url,
          agent_token: "set",
          shared: false,
        }),
      }),
    );
  });
});
