// A chat loop for tests: a user, a workspace pointing at a real agent, a model config
// pointing at the fake provider server (through the real openai-compatible provider), and a
// worker with short timings. Everything it starts, `close()` stops.

import { randomUUID } from "node:crypto";
import { afterEach } from "vitest";
import { startTestAgent } from "./agent.ts";
import { startFakeProvider } from "./fake-provider.ts";
import { AgentPool } from "../../src/chatd/agents.ts";
import { ephemeralSecretBox } from "../../src/chatd/secrets/index.ts";
import { pricesOf } from "../../src/chatd/billing.ts";
import type { Database } from "../../src/chatd/db/index.ts";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import { createChat, loadChat, loadHistory } from "../../src/chatd/transitions/index.ts";
import { Worker, type WorkerOptions } from "../../src/chatd/worker/worker.ts";
import { createLanguageModel, type LanguageModel } from "../../src/model/index.ts";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import type { Chat } from "../../src/chatd/chats.ts";

export interface LoopSetup {
  userId: string;
  workspaceId: string;
  modelConfigId: string;
}

/** Rows a chat needs: a user, a workspace at `agentUrl`, a model at the fake provider. */
export async function seed(
  db: Database,
  o: { agentUrl: string; providerUrl: string },
): Promise<LoopSetup> {
  const userId = randomUUID();
  const workspaceId = randomUUID();
  const modelConfigId = randomUUID();
  await db.query(
    "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'admin', 'x')",
    [userId, `${userId}@test`],
  );
  await db.query(
    "INSERT INTO workspaces (id, owner_id, name, agent_url) VALUES ($1, $2, 'test', $3)",
    [workspaceId, userId, o.agentUrl],
  );
  await db.query(
    "INSERT INTO model_configs (id, provider, model, base_url, is_default) VALUES ($1, 'openai-compatible', 'fake-model', $2, true)",
    [modelConfigId, o.providerUrl],
  );
  return { userId, workspaceId, modelConfigId };
}

/** A worker whose models and agents come from the rows, with test-sized timings. */
export function testWorker(db: Database, o: Partial<WorkerOptions> = {}): Worker {
  const agents = new AgentPool(db, { secrets: ephemeralSecretBox() });
  // One model object per version of a config row, as the server keeps them: a step sent ahead
  // (step-ahead.ts) is taken only by a task that resolves the same model.
  const models = new Map<string, Promise<LanguageModel>>();
  return new Worker({
    db,
    buffer: new StreamBuffer(),
    agentAnswerTimeoutMs: 2_000,
    toolResultBudgetBytes: 32 * 1024,
    leaseMs: 5_000,
    heartbeatMs: 1_000,
    acquireIntervalMs: 100,
    backoffMinMs: 20,
    backoffMaxMs: 200,
    resolveModel: async (chat: Chat) => {
      const r = await db.query<{
        id: string;
        updated_at: Date;
        enabled: boolean;
        provider: "openai" | "openai-compatible";
        base_url: string;
        input_price_per_mtok_micros: string | number;
        output_price_per_mtok_micros: string | number;
        context_limit: number | null;
        compact_threshold_percent: number | null;
      }>("SELECT * FROM model_configs WHERE id = $1", [chat.modelConfigId]);
      const c = r.rows[0]!;
      const key = `${c.id} ${c.updated_at.toISOString()} ${c.provider} ${c.base_url}`;
      let model = models.get(key);
      if (!model) {
        model = createLanguageModel({
          provider: c.provider,
          model: "fake-model",
          baseUrl: c.base_url,
          apiKey: "k",
        });
        models.set(key, model);
      }
      return {
        model: await model,
        enabled: c.enabled,
        prices: pricesOf(c),
        ...(c.context_limit !== null && { contextLimitTokens: c.context_limit }),
        ...(c.compact_threshold_percent !== null && {
          compactThresholdPercent: c.compact_threshold_percent,
        }),
      };
    },
    resolveAgent: async (chat: Chat) =>
      chat.workspaceId ? agents.forWorkspace(chat.workspaceId) : undefined,
    agentForUser: (workspaceId, userId) => agents.forUser(workspaceId, userId),
    ...o,
  });
}

export async function startChat(db: Database, s: LoopSetup, message: string): Promise<string> {
  const chat = await createChat(db, {
    ownerId: s.userId,
    workspaceId: s.workspaceId,
    modelConfigId: s.modelConfigId,
    message,
  });
  return chat.id;
}

/** Polls (real time) until the chat is waiting or in error; answers its final state and history. */
export async function settle(
  db: Database,
  chatId: string,
  ms = 15_000,
): Promise<{ chat: Chat; history: ChatMessage[] }> {
  const end = Date.now() + ms;
  for (;;) {
    const chat = (await loadChat(db, chatId))!;
    if (chat.status === "waiting" || chat.status === "error")
      return { chat, history: await loadHistory(db, chatId) };
    if (Date.now() > end) throw new Error(`chat still ${chat.status} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The tool results in history, in order. */
export function results(history: ChatMessage[]): Record<string, unknown>[] {
  return history.flatMap((m) =>
    m.content.flatMap((p) =>
      p.type === "tool-result" ? [p.result as Record<string, unknown>] : [],
    ),
  );
}

/**
 * For a test file: `env(db)` starts a real agent, the fake provider, the rows and a started
 * worker; `cleanup` holds what to stop, run in reverse after each test, even when it fails.
 */
export function useLoops() {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  const env = async (db: () => Database, workerOptions: Partial<WorkerOptions> = {}) => {
    const agent = await startTestAgent();
    cleanup.push(() => agent.close());
    const fake = await startFakeProvider();
    cleanup.push(() => fake.close());
    const setup = await seed(db(), { agentUrl: agent.url, providerUrl: fake.url });
    const worker = testWorker(db(), workerOptions);
    await worker.start();
    cleanup.push(() => worker.stop());
    return { agent, fake, setup, worker };
  };
  return { env, cleanup };
}
