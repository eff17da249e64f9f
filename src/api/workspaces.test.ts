import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, it } from "vitest";
import { until } from "../../test/support/agent.ts";
import { describeDatabases } from "../../test/support/db.ts";
import { ephemeralSecretBox, SLOTS } from "../chatd/secrets/index.ts";
import { ManualClock } from "../contract/index.ts";
import { startTestApi, type TestApi } from "./test-support.ts";
import type { WorkspaceHealth, WorkspaceView } from "./views.ts";

const secrets = ephemeralSecretBox();

describeDatabases("workspaces", (db) => {
  let api: TestApi;
  beforeEach(async () => {
    // Members register agents on loopback here; the address rule is agent-urls.test.ts's.
    api = await startTestApi(db(), { secrets, memberAgentAddresses: () => true });
  });
  afterEach(async () => {
    await api.app.close();
  });

  it("a workspace never answers its agent token, created or listed", async () => {
    const secret = "agent-secret-token";
    const created = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "repo", agent_url: "http://127.0.0.1:8080", agent_token: secret },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "repo",
      agent_url: "http://127.0.0.1:8080",
      owner_id: api.memberId,
    });
    expect(created.body).not.toHaveProperty("agent_token");
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    expect((list.body.workspaces as { id: string }[]).map((w) => w.id)).toEqual([created.body.id]);
    expect(JSON.stringify(list.body)).not.toContain(secret);
    const stored = await db().query("SELECT agent_token FROM workspaces WHERE id = $1", [
      created.body.id,
    ]);
    // Stored sealed: the row holds nothing of the token, and opens to it in its own slot only.
    const sealed = stored.rows[0]!.agent_token as string;
    expect(sealed).not.toContain(secret);
    expect(secrets.open(sealed, SLOTS.agentToken(created.body.id as string))).toBe(secret);
    const patched = await api.request("PATCH", `/api/v1/workspaces/${created.body.id as string}`, {
      token: api.memberToken,
      body: { agent_token: `${secret}-2` },
    });
    expect(patched.status).toBe(200);
    const again = await db().query("SELECT agent_token FROM workspaces WHERE id = $1", [
      created.body.id,
    ]);
    expect(again.rows[0]!.agent_token).not.toContain(secret);
    expect(
      secrets.open(
        again.rows[0]!.agent_token as string,
        SLOTS.agentToken(created.body.id as string),
      ),
    ).toBe(`${secret}-2`);
  });

  it("one workspace whose agent URL the client cannot speak to never makes the list answer 500", async () => {
    const good = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "good", agent_url: "http://127.0.0.1:1" },
    });
    expect(good.status).toBe(201);
    // A row no request could create now (an older server, a hand edit): not http or https.
    await db().query(
      "INSERT INTO workspaces (id, owner_id, name, agent_url) VALUES (gen_random_uuid(), $1, 'bad', 'ftp://127.0.0.1:21')",
      [api.memberId],
    );
    const list = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    expect(list.status).toBe(200);
    const byName = new Map(
      (list.body.workspaces as WorkspaceView[]).map((w) => [w.name, w.health] as const),
    );
    expect(byName.get("bad")).toEqual({ reachable: false, checked_at: expect.any(String) });
    expect(byName.get("good")).toMatchObject({ reachable: false });
  });

  it("a member sees their own and shared workspaces, not another member's; an admin sees all", async () => {
    const mine = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "mine", agent_url: "http://127.0.0.1:1" },
    });
    expect(mine.status).toBe(201);
    const admins = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "admin's", agent_url: "http://127.0.0.1:2" },
    });
    // A workspace without an owner (its owner deleted) is nobody's: members do not see it.
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, is_default) VALUES (gen_random_uuid(), 'orphan', 'http://127.0.0.1:3', true)",
    );
    const names = async (token: string): Promise<string[]> =>
      (
        (await api.request("GET", "/api/v1/workspaces", { token })).body.workspaces as {
          name: string;
        }[]
      )
        .map((w) => w.name)
        .sort();
    expect(await names(api.memberToken)).toEqual(["mine"]);
    expect(await names(api.adminToken)).toEqual(["admin's", "mine", "orphan"]);
    // Nor can a member start a chat on it.
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: admins.body.id },
    });
    expect(chat.status).toBe(404);
  });

  it("a workspace is deleted by its owner or an admin, never while a chat runs in it, and audited", async () => {
    const create = async (token: string, name: string) => {
      const r = await api.request("POST", "/api/v1/workspaces", {
        token,
        body: { name, agent_url: "http://127.0.0.1:1" },
      });
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const mine = await create(api.memberToken, "mine");
    const theirs = await create(api.adminToken, "theirs");
    const del = (token: string, id: string) =>
      api.request("DELETE", `/api/v1/workspaces/${id}`, { token });

    expect((await del(api.memberToken, theirs)).status).toBe(404);
    // A message starts the chat (no worker here: it stays running).
    const chat = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { workspace_id: mine, message: "go" },
    });
    expect(chat.body).toMatchObject({ status: "running", workspace_id: mine });
    const chatId = chat.body.id as string;
    const busy = await del(api.memberToken, mine);
    expect(busy.status).toBe(409);
    expect(busy.body.message).toBe("1 chat is running in this workspace.");
    expect(
      (await api.request("GET", `/api/v1/workspaces/${mine}`, { token: api.memberToken })).status,
    ).toBe(200);

    await db().query("UPDATE chats SET status = 'waiting' WHERE id = $1", [chatId]);
    expect((await del(api.memberToken, mine)).status).toBe(204);
    expect(
      (await api.request("GET", `/api/v1/workspaces/${mine}`, { token: api.memberToken })).status,
    ).toBe(404);
    // The chat keeps its history, without a workspace.
    const after = await api.request("GET", `/api/v1/chats/${chatId}`, {
      token: api.memberToken,
    });
    expect(after.body.workspace_id).toBeNull();
    expect((await del(api.adminToken, theirs)).status).toBe(204);

    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    const deletes = (audit.body.entries as { action: string; user_id: string; target: string }[])
      .filter((e) => e.action === "workspace.delete")
      .map((e) => [e.user_id, e.target]);
    expect(deletes).toEqual([
      [api.adminId, theirs],
      [api.memberId, mine],
    ]);
  });

  it("bad input is a 400 naming the field", async () => {
    const url = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name: "x", agent_url: "ftp://example.com" },
    });
    expect(url.status).toBe(400);
    expect(url.body.detail).toContain("agent_url");
    const name = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { agent_url: "http://127.0.0.1:1" },
    });
    expect(name.status).toBe(400);
    expect(name.body.detail).toContain("name");
  });
});

/** What an agent answers to `GET /api/v0/info` (contract InfoResponse). */
const FAKE_INFO = { version: "fake-1.2.3", api_version: "0", tool_calls: true };

interface FakeAgent {
  url: string;
  /** Requests it got so far (each is one health check). */
  requests(): number;
  /** Live: answers at once. Dead (the start): accepts and holds each request, never answering. */
  live: boolean;
  close(): Promise<void>;
}

/** A stand-in agent on a free loopback port that counts health checks and can play dead. */
async function startFakeAgent(): Promise<FakeAgent> {
  const started_at = new Date().toISOString();
  let requests = 0;
  const agent = {
    live: false,
    requests: () => requests,
  };
  const server = http.createServer((req, res) => {
    requests += 1;
    if (!agent.live) return;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ...FAKE_INFO, started_at }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(agent, {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

describeDatabases("workspace health cache", (db) => {
  const HEALTH_TIMEOUT_MS = 1_000;
  const HEALTH_TTL_MS = 10_000;
  let api: TestApi;
  let clock: ManualClock;
  let agents: FakeAgent[];
  beforeEach(async () => {
    clock = new ManualClock();
    agents = [];
    api = await startTestApi(db(), {
      healthTimeoutMs: HEALTH_TIMEOUT_MS,
      healthTtlMs: HEALTH_TTL_MS,
      healthClock: clock,
      memberAgentAddresses: () => true,
    });
  });
  afterEach(async () => {
    await api.app.close();
    await Promise.all(agents.map((a) => a.close()));
  });

  const fakeAgent = async (): Promise<FakeAgent> => {
    const a = await startFakeAgent();
    agents.push(a);
    return a;
  };
  const create = async (name: string, agentUrl: string): Promise<string> => {
    const made = await api.request("POST", "/api/v1/workspaces", {
      token: api.memberToken,
      body: { name, agent_url: agentUrl },
    });
    expect(made.status).toBe(201);
    return made.body.id as string;
  };
  /** The health one read answers, and how long the read took (real time). */
  const read = async (id: string): Promise<{ health: WorkspaceHealth; ms: number }> => {
    const began = performance.now();
    const a = await api.request("GET", `/api/v1/workspaces/${id}`, { token: api.memberToken });
    expect(a.status).toBe(200);
    return { health: a.body.health as WorkspaceHealth, ms: performance.now() - began };
  };
  const list = async (): Promise<WorkspaceHealth[]> => {
    const a = await api.request("GET", "/api/v1/workspaces", { token: api.memberToken });
    return (a.body.workspaces as WorkspaceView[]).map((w) => w.health!);
  };

  it("a dead agent delays only its first read; later reads get the cached answer, refreshed in the background after the TTL", async () => {
    const agent = await fakeAgent();
    const id = await create("dead", agent.url);

    // Never checked: reads wait for the one check they share, which the timeout bounds.
    const [first, again] = await Promise.all([read(id), read(id)]);
    expect(first.health).toEqual({ reachable: false, checked_at: expect.any(String) as string });
    expect(again.health).toEqual(first.health);
    expect(first.ms).toBeGreaterThanOrEqual(HEALTH_TIMEOUT_MS * 0.9);
    expect(agent.requests()).toBe(1);

    // Fresh: answered from the cache, with the time its check ran; the agent is not asked.
    clock.advance(HEALTH_TTL_MS - 1);
    expect(await list()).toEqual([first.health]);
    expect((await read(id)).health).toEqual(first.health);
    expect(agent.requests()).toBe(1);

    // Stale: still answered as it was, so not after waiting for the refresh (which, against a
    // dead agent, can only end by the timeout, with a later checked_at). One refresh for all.
    clock.advance(1);
    const [stale, staleToo] = await Promise.all([read(id), list()]);
    expect(stale.health).toEqual(first.health);
    expect(staleToo).toEqual([first.health]);
    await until(() => agent.requests() === 2);
    let refreshed: WorkspaceHealth | undefined;
    await until(async () => {
      refreshed = (await read(id)).health;
      return refreshed.checked_at !== first.health.checked_at;
    }, 10_000);
    expect(refreshed).toEqual({ reachable: false, checked_at: expect.any(String) as string });
    expect(Date.parse(refreshed!.checked_at)).toBeGreaterThan(Date.parse(first.health.checked_at));
    expect(agent.requests()).toBe(2);

    // Once it answers, the refresh after the next TTL shows it reachable, with its version.
    agent.live = true;
    clock.advance(HEALTH_TTL_MS);
    expect((await read(id)).health).toEqual(refreshed);
    let live: WorkspaceHealth | undefined;
    await until(async () => {
      live = (await read(id)).health;
      return live.reachable;
    }, 10_000);
    expect(live).toMatchObject({ reachable: true, version: FAKE_INFO.version });
    expect(live!.uptime_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(live!.checked_at)).toBeGreaterThan(Date.parse(refreshed!.checked_at));
    expect(agent.requests()).toBe(3);
  });

  it("a changed agent URL or token, or a PATCH, makes the next read check again", async () => {
    const a = await fakeAgent();
    const b = await fakeAgent();
    a.live = true;
    b.live = true;
    const id = await create("w", a.url);
    expect((await read(id)).health).toMatchObject({ reachable: true, version: FAKE_INFO.version });
    expect((await read(id)).health.reachable).toBe(true);
    expect(a.requests()).toBe(1);

    const renamed = await api.request("PATCH", `/api/v1/workspaces/${id}`, {
      token: api.memberToken,
      body: { name: "renamed" },
    });
    expect(renamed.status).toBe(200);
    await read(id);
    expect(a.requests()).toBe(2);

    // Changed by another replica, unseen by this API: the row's new agent misses the cache.
    await db().query("UPDATE workspaces SET agent_url = $2 WHERE id = $1", [id, b.url]);
    expect((await read(id)).health.reachable).toBe(true);
    expect([a.requests(), b.requests()]).toEqual([2, 1]);
    await db().query("UPDATE workspaces SET agent_token = 'another' WHERE id = $1", [id]);
    await read(id);
    expect([a.requests(), b.requests()]).toEqual([2, 2]);

    // And a dead agent put in its place is waited for, not hidden behind the live answer.
    b.live = false;
    await db().query("UPDATE workspaces SET agent_token = NULL WHERE id = $1", [id]);
    const dead = await read(id);
    expect(dead.health.reachable).toBe(false);
    expect(dead.ms).toBeGreaterThanOrEqual(HEALTH_TIMEOUT_MS * 0.9);
  });

  it("the health of a workspace nobody read for long is dropped, so its next read checks again", async () => {
    const agent = await fakeAgent();
    agent.live = true;
    const idle = await create("idle", agent.url);
    const other = await create("other", agent.url);
    const before = (await read(idle)).health;
    expect(agent.requests()).toBe(1);
    clock.advance(11 * 60_000);
    await read(other); // drops the idle entry
    expect(agent.requests()).toBe(2);
    // Were it kept, this read would answer the old (stale) health at once.
    const after = (await read(idle)).health;
    expect(after.checked_at).not.toBe(before.checked_at);
    expect(agent.requests()).toBe(3);
  });
});
