// An interrupted compaction is billed (issue 13, docs/prompt.md, CHATD.md 9): the real worker on
// a ManualClock, the real openai-compatible provider against the fake provider server (whose
// summary stream stops after a few words and hangs), a real agent, and the usage route of the
// real API on the same database, so the billed figure is exact.

import { expect, it } from "vitest";
import { startTestApi } from "../../src/api/test-support.ts";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import { COMPACTION_PROMPT_HEAD } from "../../src/chatd/prompt/index.ts";
import {
  interrupt,
  loadChat,
  loadHistory,
  requestCompaction,
  sendMessage,
} from "../../src/chatd/transitions/index.ts";
import { ManualClock } from "../../src/contract/index.ts";
import { until } from "../support/agent.ts";
import { settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";
import type { FakeChatRequest } from "../support/fake-provider.ts";

const { env, cleanup } = useLoops();

const firstContent = (r: FakeChatRequest) => {
  const c = (r.messages as { content?: unknown }[])[0]?.content;
  return typeof c === "string" ? c : "";
};
const isCompaction = (r: FakeChatRequest) => firstContent(r).startsWith(COMPACTION_PROMPT_HEAD);
const boundaries = (h: ChatMessage[]) => h.filter((m) => m.boundary);
const compactionUsage = (h: ChatMessage[]) =>
  h.filter((m) => m.content.some((p) => p.type === "compaction-usage"));

describeDatabases("an interrupted compaction", (db) => {
  it("bills its model time up to the interrupt on a usage record and commits no boundary; the next one commits one", async () => {
    const api = await startTestApi(db());
    cleanup.push(() => api.app.close());
    const clock = new ManualClock();
    const { fake, setup } = await env(db, { clock });
    const usage = async (chatId: string) => {
      const r = await api.request("GET", "/api/v1/usage?group_by=chat", {
        token: api.adminToken,
      });
      expect(r.status).toBe(200);
      return (r.body.rows as Record<string, unknown>[]).find((row) => row.chat_id === chatId);
    };

    fake.script({ text: "First answer." });
    const chatId = await startChat(db(), setup, "hello");
    await settle(db(), chatId);
    // The clock has not moved: the first step's model window is 0 ms.
    expect(await usage(chatId)).toMatchObject({ model_runtime_ms: 0, runtime_ms: 0 });

    // The user asks for a compaction; its summary streams a few words, then hangs. 4 s after
    // its model call opened, the user interrupts it.
    fake.script({ text: "SUMMARY: the user said hello and", hangAfterChunks: 4 });
    expect(await requestCompaction(db(), chatId)).toBe("running");
    await until(() => fake.requests.some(isCompaction), 10_000);
    clock.advance(4_000);
    await interrupt(db(), chatId);
    const stopped = await settle(db(), chatId);
    expect(stopped.chat.status).toBe("waiting");
    expect(boundaries(stopped.history)).toHaveLength(0);
    expect(compactionUsage(stopped.history)).toEqual([
      expect.objectContaining({
        role: "system",
        visibility: "model",
        boundary: false,
        runtimeMs: 4_000,
        content: [{ type: "compaction-usage", billed_ms: 4_000 }],
      }),
    ]);
    expect(await usage(chatId)).toMatchObject({
      model_runtime_ms: 4_000,
      tool_runtime_ms: 0,
      runtime_ms: 4_000,
    });

    // The record never reaches the model: the next step's prompt is the conversation alone.
    fake.script({ text: "Second answer." });
    await sendMessage(db(), chatId, setup.userId, "again", "queue");
    await settle(db(), chatId);
    const next = fake.requests.at(-1)!;
    expect(isCompaction(next)).toBe(false);
    expect((next.messages as { role: string }[]).map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "user",
    ]);

    // Asked again, the compaction runs to the end: one boundary, billed on the boundary.
    fake.script({ text: "SUMMARY: said hello twice." });
    await requestCompaction(db(), chatId);
    const done = await settle(db(), chatId);
    expect(done.chat.status).toBe("waiting");
    const history = await loadHistory(db(), chatId);
    expect(boundaries(history)).toHaveLength(1);
    expect(compactionUsage(history)).toHaveLength(1);
    expect(fake.requests.filter(isCompaction)).toHaveLength(2);
  });

  it("a failed compaction attempt bills nothing, even when the user interrupts its retry's wait", async () => {
    const clock = new ManualClock();
    // The retry waits a minute on the manual clock: the interrupt comes while it waits.
    const { fake, setup } = await env(db, { clock, backoffMinMs: 60_000, backoffMaxMs: 60_000 });
    fake.script({ text: "First answer." });
    const chatId = await startChat(db(), setup, "hello");
    await settle(db(), chatId);

    fake.script({ error: { status: 500 } });
    await requestCompaction(db(), chatId);
    await until(async () => (await loadChat(db(), chatId))!.retryState !== null, 10_000);
    expect(fake.requests.filter(isCompaction)).toHaveLength(1);
    clock.advance(4_000);
    await interrupt(db(), chatId);
    const stopped = await settle(db(), chatId);
    expect(stopped.chat.status).toBe("waiting");
    expect(boundaries(stopped.history)).toHaveLength(0);
    expect(compactionUsage(stopped.history)).toEqual([]);
    expect(stopped.history.reduce((ms, m) => ms + m.runtimeMs, 0)).toBe(0);
  });
});
