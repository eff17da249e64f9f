// Dial-out agents and several replicas on one Postgres: any replica drives an agent connected
// to another (through the holder's internal route), and when the holder is SIGKILLed while a
// command runs, the agent dials a surviving replica and the chat's tool call still ends with one
// run and its real result. A TCP front (a load balancer) stands between the agent and the
// replicas, so the test decides which replica the agent reaches.

import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentConnection } from "../../src/chatd/dialout/index.ts";
import { testDatabaseUrl } from "../support/db.ts";
import {
  registerDialoutWorkspace,
  startAgentProcess,
  type AgentProcess,
} from "../support/dialout.ts";
import {
  hasToolResult,
  startCluster,
  toolResults,
  waitFor,
  type Cluster,
  type Replica,
} from "../support/replicas.ts";
import { hostPort, startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";

const skip = testDatabaseUrl() === undefined;
if (skip) {
  console.warn(
    "TETHER_TEST_DATABASE_URL is not set: the dial-out replica tests need a Postgres server and are skipped.",
  );
}

describe.skipIf(skip)("dial-out agents across replicas", () => {
  let cluster: Cluster;
  const cleanups: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  const marker = (name: string) => readFile(path.join(cluster.dir, name), "utf8").catch(() => "");

  /**
   * A dial-out workspace whose agent (behind a TCP front) is up past the age margin, then cut
   * off: the next chat's first tool call waits for it, and the test says where it reconnects.
   */
  const warmAgentOffline = async (
    replica: Replica,
  ): Promise<{ ws: string; proxy: TcpProxy; agent: AgentProcess }> => {
    const { workspaceId: ws, token } = await registerDialoutWorkspace(cluster.db);
    const proxy = await startTcpProxy([hostPort(replica.url)]);
    cleanups.push(() => proxy.close());
    const agent = startAgentProcess({ server: proxy.url, dir: cluster.dir, token }, (f) =>
      cleanups.push(f),
    );
    await agent.connected();
    await waitFor("the agent to be past its age margin", async () => {
      const c = await agentConnection(cluster.db, ws);
      return c !== undefined && c.uptimeMs > 2_500;
    });
    proxy.setTargets([]);
    proxy.cutAll();
    await waitFor(
      "the agent to be disconnected",
      async () => !(await agentConnection(cluster.db, ws)),
    );
    return { ws, proxy, agent };
  };

  /** A chat in `ws` through `via`, and the replica that owns it once it runs. */
  const chatOn = async (via: Replica, replicas: Replica[], ws: string, message: string) => {
    const { id } = await cluster.api<{ id: string }>(via, "POST", "/api/v1/chats", {
      workspace_id: ws,
      message,
    });
    const ownerId = await waitFor("an owner", () => cluster.owner(id));
    const owner = replicas.find((r) => r.workerId === ownerId)!;
    return { chatId: id, owner, other: replicas.find((r) => r !== owner)! };
  };

  it("a replica drives an agent connected to another replica: the chat's first start waits for the agent, then goes through the holder", async () => {
    const replicas = await cluster.startReplicas(2);
    const { ws, proxy } = await warmAgentOffline(replicas[0]!);
    cluster.fake.respond((req) =>
      hasToolResult(req)
        ? { text: "done" }
        : {
            toolCalls: [{ name: "execute", args: { command: "echo run >> relayed.txt; echo ok" } }],
          },
    );
    const { chatId, owner, other } = await chatOn(replicas[0]!, replicas, ws, "run it");
    // The agent comes back on the replica that does not own the chat.
    proxy.setTargets([hostPort(other.url)]);
    await waitFor("the agent to connect to the other replica", async () => {
      const c = await agentConnection(cluster.db, ws);
      return c?.workerId === other.workerId;
    });
    const { status, messages } = await cluster.settle(owner, chatId);
    expect(status).toBe("waiting");
    expect(toolResults(messages)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "ok\n" }),
    ]);
    expect(await marker("relayed.txt")).toBe("run\n");
    // The API's process reads go the same way, from the replica that does not hold the agent.
    const { processes } = await cluster.api<{ processes: { running: boolean }[] }>(
      owner,
      "GET",
      `/api/v1/chats/${chatId}/processes`,
    );
    expect(processes).toEqual([expect.objectContaining({ running: false })]);
    await Promise.all(replicas.map((r) => r.stop("SIGTERM")));
  }, 90_000);

  it("after SIGKILL of the replica holding the agent mid-command, the agent dials a survivor and the tool call ends with one run and its real result", async () => {
    const replicas = await cluster.startReplicas(2);
    const { ws, proxy } = await warmAgentOffline(replicas[0]!);
    cluster.fake.respond((req) =>
      hasToolResult(req)
        ? { text: "done" }
        : {
            toolCalls: [
              {
                name: "execute",
                args: {
                  command:
                    "echo run >> held.txt; while [ ! -e held-go ]; do sleep 0.05; done; echo finished",
                  timeout: "60s",
                },
              },
            ],
          },
    );
    const { chatId, owner, other: holder } = await chatOn(replicas[0]!, replicas, ws, "run it");
    // The agent connects to the replica that does not own the chat, and falls back on the owner.
    proxy.setTargets([hostPort(holder.url), hostPort(owner.url)]);
    await waitFor("the command to start", async () => (await marker("held.txt")) !== "");
    expect((await agentConnection(cluster.db, ws))?.workerId).toBe(holder.workerId);

    await holder.stop("SIGKILL");
    await waitFor("the agent to reconnect to the owner", async () => {
      const c = await agentConnection(cluster.db, ws);
      return c?.workerId === owner.workerId;
    });
    await writeFile(path.join(cluster.dir, "held-go"), "");
    const { status, messages } = await cluster.settle(owner, chatId);
    expect(status).toBe("waiting");
    expect(toolResults(messages)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "finished\n" }),
    ]);
    expect(await marker("held.txt")).toBe("run\n");
    await owner.stop("SIGTERM");
  }, 90_000);
});
