// The prompt end to end (issue 13, docs/prompt.md): the environment block and the workspace's
// instruction files in the system prompt, the per-chat snapshot and its refresh, relative paths
// from the model, and compaction — on the threshold, on request, on a provider's
// context-length refusal, interrupted and retried — with the real worker, the real
// openai-compatible provider against the fake provider server and a real agent.

import { writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { FenceError } from "../../src/chatd/chats.ts";
import {
  captureSnapshot,
  COMPACTION_PROMPT_HEAD,
  loadSnapshot,
  replaceSnapshot,
  setOrganizationInstructions,
  SUMMARY_LEAD,
} from "../../src/chatd/prompt/index.ts";
import { CONTEXT_FILE_MAX_BYTES } from "../../src/agent/context.ts";
import {
  commitCompaction,
  interrupt,
  loadChat,
  loadHistory,
  requestCompaction,
  sendMessage,
} from "../../src/chatd/transitions/index.ts";
import type { Database } from "../../src/chatd/db/index.ts";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import { results, settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";
import type { FakeChatRequest, FakeProvider, FakeStep } from "../support/fake-provider.ts";

const { env } = useLoops();

type Msg = { role: string; content?: unknown };
const messagesOf = (r: FakeChatRequest) => r.messages as Msg[];
const systemOf = (r: FakeChatRequest) => {
  const c = messagesOf(r)[0]?.content;
  return typeof c === "string" ? c : JSON.stringify(c ?? "");
};
const isCompaction = (r: FakeChatRequest) => systemOf(r).startsWith(COMPACTION_PROMPT_HEAD);
const modelSteps = (fake: FakeProvider) => fake.requests.filter((r) => !isCompaction(r));
const boundaries = (h: ChatMessage[]) => h.filter((m) => m.boundary);

async function setModel(
  db: Database,
  id: string,
  o: { contextLimit?: number; thresholdPercent?: number },
) {
  await db.query(
    "UPDATE model_configs SET context_limit = $2, compact_threshold_percent = $3 WHERE id = $1",
    [id, o.contextLimit ?? null, o.thresholdPercent ?? null],
  );
}

/** Polls until `f` holds (real time, bounded). */
async function until(f: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describeDatabases("the prompt", (db) => {
  it("the system prompt carries the environment block and AGENTS.md, not a file above the cap; the snapshot holds until refresh", async () => {
    const { fake, setup, agent } = await env(db);
    await writeFile(path.join(agent.dir, "AGENTS.md"), "Always answer in French.\n");
    const big = `${"x".repeat(CONTEXT_FILE_MAX_BYTES)}\nTAIL-BEYOND-THE-CAP\n`;
    await writeFile(path.join(agent.dir, "CLAUDE.md"), big);
    fake.script(
      { toolCalls: [{ id: "r", name: "read_file", args: { path: "AGENTS.md" } }] },
      { text: "Lu." },
    );
    const chatId = await startChat(db(), setup, "read the rules");
    const first = await settle(db(), chatId);
    expect(first.chat.status).toBe("waiting");
    const system = systemOf(fake.requests[0]!);
    expect(system).toContain(`- Workspace directory: ${agent.dir}`);
    expect(system).toContain(`- OS: ${process.platform} (${process.arch})`);
    expect(system).toMatch(/- Date: \d{4}-\d{2}-\d{2}/);
    expect(system).toContain("- Git: not a git repository");
    expect(system).toContain(`## ${path.join(agent.dir, "AGENTS.md")}\n\nAlways answer in French.`);
    expect(system).toContain(
      `[truncated: the first ${CONTEXT_FILE_MAX_BYTES} of ${big.length} bytes]`,
    );
    expect(system).not.toContain("TAIL-BEYOND-THE-CAP");
    // A relative path from the model works and its result names the absolute path.
    expect(results(first.history)[0]).toMatchObject({
      status: "completed",
      path: path.join(agent.dir, "AGENTS.md"),
      content: "1\tAlways answer in French.",
    });

    // AGENTS.md changes: the running conversation's prompt does not, until a refresh.
    await writeFile(path.join(agent.dir, "AGENTS.md"), "Always answer in German.\n");
    await sendMessage(db(), chatId, setup.userId, "again", "queue");
    await settle(db(), chatId);
    expect(systemOf(fake.requests.at(-1)!)).toContain("Always answer in French.");
    await replaceSnapshot(
      db(),
      chatId,
      await captureSnapshot(db(), agent.client, AbortSignal.timeout(5_000)),
    );
    await sendMessage(db(), chatId, setup.userId, "and again", "queue");
    await settle(db(), chatId);
    const last = systemOf(fake.requests.at(-1)!);
    expect(last).toContain("Always answer in German.");
    expect(last).not.toContain("French");
  });

  it("an agent that cannot be reached at the first step: the prompt says so and keeps the organisation's instructions", async () => {
    const { fake, setup } = await env(db);
    await setOrganizationInstructions(db(), "Never push to main.", setup.userId);
    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    await db().query("UPDATE workspaces SET agent_url = 'http://127.0.0.1:9' WHERE id = $1", [
      setup.workspaceId,
    ]);
    fake.script({ text: "noted" });
    const chatId = await startChat(db(), setup, "hello");
    expect((await settle(db(), chatId)).chat.status).toBe("waiting");
    const system = systemOf(fake.requests[0]!);
    expect(system).toContain("could not be reached to learn its environment");
    expect(system).toContain("Never push to main.");
    expect(await loadSnapshot(db(), chatId)).toBeUndefined(); // nothing kept: the next step asks
  });

  it("a chat crosses the threshold, compacts once, and the next request holds the summary and only what follows", async () => {
    const { fake, setup } = await env(db);
    await setModel(db(), setup.modelConfigId, { contextLimit: 2_000 }); // threshold 1,400
    const sizes = [500, 900, 1_500];
    let step = 0;
    fake.respond((req): FakeStep => {
      if (isCompaction(req))
        return {
          text: "SUMMARY-42: echoed 1, 2, 3.",
          usage: { prompt_tokens: 300, completion_tokens: 9 },
        };
      step += 1;
      if (step <= 3)
        return {
          toolCalls: [{ id: `c${step}`, name: "execute", args: { command: `echo step-${step}` } }],
          usage: { prompt_tokens: sizes[step - 1]!, completion_tokens: 5 },
        };
      return { text: "All done.", usage: { prompt_tokens: 200, completion_tokens: 3 } };
    });
    const chatId = await startChat(db(), setup, "echo three times");
    const { chat } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    const history = await loadHistory(db(), chatId);
    expect(boundaries(history)).toHaveLength(1);
    const b = boundaries(history)[0]!;
    expect(b.content[0]).toMatchObject({
      type: "compaction",
      summary: "SUMMARY-42: echoed 1, 2, 3.",
      reason: "threshold",
      prompt_tokens_before: 1_500,
      turn_complete: false,
    });
    // Billed: its tokens and model time are on the boundary.
    expect(b.inputTokens).toBe(300);
    expect(b.outputTokens).toBe(9);
    // The compaction request came after the third batch, with no tools.
    const compaction = fake.requests.find(isCompaction)!;
    expect(compaction.tools ?? []).toEqual([]);
    expect(JSON.stringify(compaction.messages)).toContain("echo step-3");
    // The step after it: the system prompt, the summary, nothing from before the boundary.
    const after = modelSteps(fake)[3]!;
    const msgs = messagesOf(after);
    expect(msgs.map((m) => m.role)).toEqual(["system", "user"]);
    expect(String(msgs[1]!.content)).toBe(`${SUMMARY_LEAD}\n\nSUMMARY-42: echoed 1, 2, 3.`);
    expect(JSON.stringify(msgs)).not.toContain("step-1");
    // Each step recorded its prompt size and the limit it was measured against.
    const steps = history.filter((m) => m.role === "assistant");
    expect(steps.map((m) => [m.promptTokens, m.contextLimit])).toEqual([
      [500, 2_000],
      [900, 2_000],
      [1_500, 2_000],
      [200, 2_000],
    ]);
  });

  it("a threshold of 100 turns compaction off", async () => {
    const { fake, setup } = await env(db);
    await setModel(db(), setup.modelConfigId, { contextLimit: 1_000, thresholdPercent: 100 });
    fake.script(
      {
        toolCalls: [{ id: "a", name: "execute", args: { command: "true" } }],
        usage: { prompt_tokens: 990, completion_tokens: 1 },
      },
      { text: "ok", usage: { prompt_tokens: 995, completion_tokens: 1 } },
    );
    const chatId = await startChat(db(), setup, "go");
    await settle(db(), chatId);
    expect(boundaries(await loadHistory(db(), chatId))).toHaveLength(0);
    expect(fake.requests.some(isCompaction)).toBe(false);
  });

  it("a provider's context-length refusal compacts once and retries; refused again, the turn fails clearly", async () => {
    const { fake, setup } = await env(db);
    const tooLong = {
      error: {
        status: 400,
        message:
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
      },
    };
    fake.script(
      { toolCalls: [{ id: "a", name: "execute", args: { command: "echo one" } }] },
      tooLong,
      { text: "SUMMARY: echoed one." },
      { text: "Answered after compacting." },
    );
    const chatId = await startChat(db(), setup, "go");
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(boundaries(history).map((m) => m.content[0])).toEqual([
      expect.objectContaining({ type: "compaction", reason: "context_too_long" }),
    ]);
    expect(history.at(-1)!.content).toEqual([{ type: "text", text: "Answered after compacting." }]);
    expect(isCompaction(fake.requests[2]!)).toBe(true);
    expect(fake.requests).toHaveLength(4);

    // Refused again right after the compaction: one compaction, then the turn fails.
    fake.script(
      { toolCalls: [{ id: "b", name: "execute", args: { command: "echo two" } }] },
      tooLong,
      { text: "SUMMARY: echoed two." },
      tooLong,
    );
    await sendMessage(db(), chatId, setup.userId, "more", "queue");
    const failed = await settle(db(), chatId);
    expect(failed.chat.status).toBe("error");
    expect(failed.chat.lastError?.message).toMatch(
      /too long for the model's context .* even after compacting/,
    );
    expect(boundaries(failed.history)).toHaveLength(2);
    expect(fake.requests).toHaveLength(8);
  });

  it("an interrupted compaction commits no boundary; a retried one commits exactly one", async () => {
    const { fake, setup } = await env(db, { backoffMinMs: 10, backoffMaxMs: 20 });
    fake.script({ text: "First answer." });
    const chatId = await startChat(db(), setup, "hello");
    await settle(db(), chatId);

    // Asked for by the user; its model call hangs; the user interrupts it.
    fake.script({ text: "never", hangAfterChunks: 1 });
    expect(await requestCompaction(db(), chatId)).toBe("running");
    await until(() => fake.requests.some(isCompaction));
    await interrupt(db(), chatId);
    const stopped = await settle(db(), chatId);
    expect(stopped.chat.status).toBe("waiting");
    expect(stopped.chat.compactRequested).toBe(false);
    expect(boundaries(await loadHistory(db(), chatId))).toHaveLength(0);

    // Asked again: the first attempt fails (the task retries), the second commits.
    fake.script({ error: { status: 500 } }, { text: "SUMMARY: said hello." });
    await requestCompaction(db(), chatId);
    const done = await settle(db(), chatId);
    expect(done.chat.status).toBe("waiting");
    const history = await loadHistory(db(), chatId);
    expect(boundaries(history)).toHaveLength(1);
    expect(boundaries(history)[0]!.content[0]).toMatchObject({
      reason: "requested",
      turn_complete: true,
    });
    expect(fake.requests.filter(isCompaction)).toHaveLength(3);

    // A stale compaction task (its fence is from before the boundary) commits nothing.
    const chat = (await loadChat(db(), chatId))!;
    await expect(
      commitCompaction(
        db(),
        {
          chatId,
          workerId: "w",
          runnerId: "r",
          status: "running",
          historyVersion: chat.historyVersion,
        },
        { role: "system", visibility: "both", content: [] },
      ),
    ).rejects.toBeInstanceOf(FenceError);
    expect(boundaries(await loadHistory(db(), chatId))).toHaveLength(1);
  });
});

describeDatabases("a long scripted chat", (db) => {
  it("200 model steps stay under the context limit: each step past the threshold is followed by one compaction", async () => {
    const { fake, setup } = await env(db);
    const limit = 3_000; // threshold: 70 % = 2,100 tokens
    await setModel(db(), setup.modelConfigId, { contextLimit: limit });
    const steps = 200;
    let step = 0;
    fake.respond((req): FakeStep => {
      if (isCompaction(req)) return { text: `SUMMARY after step ${step}: echoed 1..${step}.` };
      step += 1;
      if (step <= steps)
        return {
          toolCalls: [{ id: `c${step}`, name: "execute", args: { command: `echo step-${step}` } }],
        };
      return { text: "Done." };
    });
    const chatId = await startChat(db(), setup, "echo 200 times");
    const { chat } = await settle(db(), chatId, 240_000);
    expect(chat.status).toBe("waiting");
    const history = await loadHistory(db(), chatId);
    const prompts = history.filter((m) => m.role === "assistant").map((m) => m.promptTokens!);
    const threshold = (limit * 70) / 100;
    const over = prompts.filter((p) => p >= threshold).length;
    const compactions = boundaries(history).length;
    const figures = {
      model_steps: prompts.length,
      context_limit: limit,
      threshold,
      max_prompt: Math.max(...prompts),
      mean_prompt: Math.round(prompts.reduce((a, b) => a + b, 0) / prompts.length),
      steps_at_or_over_threshold: over,
      compactions,
      max_prompt_after_a_compaction: Math.max(
        ...history.flatMap((m, i) =>
          m.boundary
            ? history
                .slice(i + 1)
                .filter((n) => n.role === "assistant")
                .slice(0, 1)
                .map((n) => n.promptTokens!)
            : [],
        ),
      ),
      messages: history.length,
      compaction_requests: fake.requests.filter(isCompaction).length,
    };
    console.log(`200-step chat (${db().kind}): ${JSON.stringify(figures)}`);
    expect(prompts).toHaveLength(steps + 1);
    expect(Math.max(...prompts)).toBeLessThan(limit);
    expect(compactions).toBeGreaterThan(0);
    // Every crossing compacts exactly once, and the prompt after it is back under the threshold.
    expect(compactions).toBe(over);
    expect(figures.compaction_requests).toBe(compactions);
    expect(figures.max_prompt_after_a_compaction).toBeLessThan(threshold);
  }, 300_000);
});
