// What the worker tells an operator, end to end: a real agent, the fake provider, the worker
// with a captured log and its own metrics. Every line about a tool call carries chat_id, the
// contract's tool call UUID and replica; every committed result is counted once.

import { randomInt, randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { agentRequestObserver, createChatdMetrics } from "../../src/chatd/observe.ts";
import { interrupt } from "../../src/chatd/transitions/index.ts";
import { createLogger } from "../../src/cli/log.ts";
import {
  AgentClient,
  parseChatId,
  toMessageId,
  toolCallUuid,
  type ToolCallUuid,
} from "../../src/contract/index.ts";
import { until } from "../support/agent.ts";
import { results, settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import type { Logger } from "pino";

const { env, cleanup } = useLoops();

type Line = Record<string, unknown> & { msg: string; level: number };

function captureLog(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const log = createLogger({
    destination: { write: (s: string) => void lines.push(JSON.parse(s) as Line) },
  });
  return { log, lines };
}

/** The UUID of the call `toolCallId` in the first assistant message of `history`. */
function uuidOf(chatId: string, history: ChatMessage[], toolCallId: string): ToolCallUuid {
  const holder = history.find((m) => m.role === "assistant")!;
  return toolCallUuid(parseChatId(chatId)!, toMessageId(holder.id)!, toolCallId);
}

describeDatabases("worker observability", (db) => {
  it("a tool call is logged when sent and when its result commits, with chat_id, tool_call_uuid and replica, and counted once", async () => {
    const { log, lines } = captureLog();
    const metrics = createChatdMetrics(db());
    const { fake, setup, worker } = await env(db, { log, metrics });
    fake.script(
      { toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }] },
      { text: "Done." },
    );
    const chatId = await startChat(db(), setup, "run it");
    const { history } = await settle(db(), chatId);
    expect(results(history)).toEqual([expect.objectContaining({ status: "completed" })]);

    const uuid = uuidOf(chatId, history, "call_1");
    const about = lines.filter((l) => l.tool_call_uuid !== undefined);
    expect(about.map((l) => l.msg)).toEqual(["tool call sent", "tool call result committed"]);
    for (const l of about) {
      expect(l).toMatchObject({ level: 30, chat_id: chatId, tool_call_uuid: uuid });
      expect(l.replica).toBe(worker.id);
    }
    expect(about[1]).toMatchObject({ tool: "execute", status: "completed" });

    expect(metrics.toolCalls.value({ tool: "execute", status: "completed" })).toBe(1);
    expect(metrics.modelStreamSeconds.value().count).toBe(2);
    expect(metrics.leaseTakeovers.value()).toBe(0);
    // The finished chat's runner lets go.
    await until(() => metrics.chatsOwned.value() === 0);
    const text = await metrics.registry.render();
    expect(text).toContain('tether_chats{status="waiting"} 1\n');
    expect(text).toContain('tether_chats{status="running"} 0\n');
    expect(text).toContain('tether_tool_calls_total{tool="execute",status="completed"} 1\n');
  });

  it("an interrupt is logged from start to commit, its duration observed, its canceled result counted", async () => {
    const { log, lines } = captureLog();
    const metrics = createChatdMetrics(db());
    const { agent, fake, setup, worker } = await env(db, { log, metrics });
    const marker = `30.${randomInt(100_000, 999_999)}`;
    fake.script({
      toolCalls: [{ id: "long", name: "execute", args: { command: `sleep ${marker}` } }],
    });
    const chatId = await startChat(db(), setup, "go");
    await until(async () => {
      const processes = agent.allProcesses();
      return processes.some((p) => p.command.includes(marker) && p.running);
    }, 10_000);
    expect(await interrupt(db(), chatId)).toBe("interrupting");
    const { history } = await settle(db(), chatId);
    expect(results(history)).toEqual([expect.objectContaining({ status: "canceled" })]);
    // The interrupt's commit is the turn's end, so the chat can read as settled before the
    // worker resumes after that commit to observe and log it.
    await until(() => lines.some((l) => l.msg === "interrupt committed"));

    const started = lines.find((l) => l.msg === "interrupt started");
    const committed = lines.find((l) => l.msg === "interrupt committed");
    expect(started).toMatchObject({ chat_id: chatId, replica: worker.id });
    expect(committed).toMatchObject({ chat_id: chatId, replica: worker.id, calls: 1 });
    expect(committed!.duration_ms).toEqual(expect.any(Number));
    const result = lines.filter((l) => l.msg === "tool call result committed");
    expect(result).toEqual([
      expect.objectContaining({
        chat_id: chatId,
        tool_call_uuid: uuidOf(chatId, history, "long"),
        replica: worker.id,
        status: "canceled",
      }),
    ]);
    expect(metrics.interruptSeconds.value().count).toBe(1);
    expect(metrics.toolCalls.value({ tool: "execute", status: "canceled" })).toBe(1);
  });

  it("a chat whose owner's lease ran out is taken over: counted and logged with the previous replica", async () => {
    const { log, lines } = captureLog();
    const metrics = createChatdMetrics(db());
    const { fake, setup, worker } = await env(db, { log, metrics });
    fake.script({ text: "Picked up." });
    // A running chat owned by a worker that died a minute ago, set up out of the worker's
    // sight (no notification), so only the lease check can hand it over.
    const dead = randomUUID();
    const chatId = randomUUID();
    await db().transaction(async (tx) => {
      await tx.query(
        `INSERT INTO chats (id, owner_id, workspace_id, model_config_id, title, status, worker_id, runner_id)
         VALUES ($1, $2, $3, $4, '', 'running', $5, gen_random_uuid())`,
        [chatId, setup.userId, setup.workspaceId, setup.modelConfigId, dead],
      );
      await tx.query(
        `INSERT INTO chat_messages (chat_id, role, visibility, content) VALUES ($1, 'user', 'both', $2)`,
        [chatId, JSON.stringify([{ type: "text", text: "hi" }])],
      );
      await tx.query(
        `INSERT INTO chat_heartbeats (chat_id, runner_id, heartbeat_at)
         SELECT id, runner_id, now() - interval '1 minute' FROM chats WHERE id = $1`,
        [chatId],
      );
    });
    const { chat } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(metrics.leaseTakeovers.value()).toBe(1);
    expect(lines.filter((l) => l.msg === "took over chat")).toEqual([
      expect.objectContaining({ chat_id: chatId, previous_replica: dead, replica: worker.id }),
    ]);
  });

  it("an agent that cannot be reached is a warning about the tool call, and its request is timed", async () => {
    const { log, lines } = captureLog();
    const metrics = createChatdMetrics(db());
    const workerId = randomUUID();
    const client = new AgentClient({
      baseUrl: "http://127.0.0.1:1",
      onRequest: agentRequestObserver(metrics, log.child({ replica: workerId })),
    });
    cleanup.push(async () => client.close());
    const { fake, setup } = await env(db, {
      log,
      metrics,
      workerId,
      agentAnswerTimeoutMs: 500,
      resolveAgent: async () => client,
    });
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: "true" } }] },
      { text: "ok" },
    );
    const chatId = await startChat(db(), setup, "go");
    const { history } = await settle(db(), chatId);
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "agent_unreachable" }),
    ]);
    // The chat's context snapshot asks the agent too (GET /api/v0/context) and fails alike;
    // the tool call's own request is the one that names it.
    const warned = lines.filter(
      (l) => l.msg === "agent request failed" && l.route !== "GET /api/v0/context",
    );
    expect(warned).toEqual([
      expect.objectContaining({
        level: 40,
        route: "POST /api/v0/processes/start",
        chat_id: chatId,
        tool_call_uuid: uuidOf(chatId, history, "x"),
        replica: workerId,
        err: expect.objectContaining({ type: "AgentConnectionError" }) as unknown,
      }),
    ]);
    expect(lines.find((l) => l.msg === "tool call result committed")).toMatchObject({
      status: "unknown",
      reason: "agent_unreachable",
      replica: workerId,
    });
    expect(metrics.agentRequestSeconds.value({ route: "POST /api/v0/processes/start" }).count).toBe(
      1,
    );
  });
});
