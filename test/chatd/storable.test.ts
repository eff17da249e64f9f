// Text the database cannot store never reaches it raw (issue 11, item 4): NUL and lone
// surrogates in tool output, file content and model text are replaced with U+FFFD when they are
// committed, a tool result says so in its `note`, and the chat goes on — through a real agent,
// real processes and the fake provider, on PGlite and on Postgres. Each chat ends `waiting`;
// an interrupt of each ends `waiting` too.

import { randomInt } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import { StreamBuffer } from "../../src/chatd/stream.ts";
import { createChat, interrupt, sendMessage } from "../../src/chatd/transitions/index.ts";
import { createLanguageModel } from "../../src/model/index.ts";
import { until, type TestAgent } from "../support/agent.ts";
import { results, settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env: loops } = useLoops();
/** The loop with an answer timeout that a loaded machine does not reach by accident. */
const env: typeof loops = (db, o = {}) => loops(db, { agentAnswerTimeoutMs: 10_000, ...o });

const NUL = "\u0000";
const LONE_HIGH = "\ud800";
const LONE_LOW = "\udfff";

/** Every string in `value` (keys too), so a test can look for what must not be there. */
function allText(value: unknown): string {
  return JSON.stringify(value);
}

/** True when no NUL and no unpaired surrogate is in any string of the history. */
function storable(history: ChatMessage[]): boolean {
  const text = allText(history.map((m) => m.content));
  // JSON.stringify writes NUL as \u0000 and a lone surrogate as \udXXX.
  return !/\\u0000|\\ud[89a-f][0-9a-f]{2}/i.test(text);
}

/** Commands whose output the database cannot hold as it is. */
const COMMANDS = [
  { name: "printf of NUL bytes", command: `printf "a\\000b\\000c\\000"`, nul: true },
  { name: "head -c 4096 /dev/zero", command: "head -c 4096 /dev/zero", nul: true },
  { name: "head -c 65536 /dev/urandom", command: "head -c 65536 /dev/urandom", nul: false },
] as const;

/** A sleep duration no other test uses, so the command is told apart in the process list. */
function uniqueSleep(): string {
  return `30.${randomInt(100_000, 999_999)}`;
}

async function runningWith(agent: TestAgent, text: string): Promise<boolean> {
  const processes = agent.allProcesses();
  return processes.some((p) => p.command.includes(text) && p.running);
}

describeDatabases("text the database cannot store", (db) => {
  for (const c of COMMANDS) {
    it(`a command printing unstorable bytes (${c.name}) completes, and its result says what was replaced`, async () => {
      const { fake, setup } = await env(db);
      fake.script(
        { toolCalls: [{ id: "x", name: "execute", args: { command: c.command } }] },
        { text: "done" },
      );
      const chatId = await startChat(db(), setup, "go");
      const { chat, history } = await settle(db(), chatId, 10_000);
      expect(chat.status).toBe("waiting");
      expect(chat.lastError).toBeNull();
      const [r] = results(history);
      expect(r).toMatchObject({ status: "completed", exit_code: 0 });
      expect(storable(history)).toBe(true);
      if (c.nul) {
        // As many replacement characters as the note counts (the agent cuts a long line).
        const replaced = [...String(r!.output)].filter((ch) => ch === "\ufffd").length;
        expect(replaced).toBeGreaterThanOrEqual(3);
        expect(r!.note).toContain(`${replaced} NUL bytes were replaced with U+FFFD`);
      }
      // The model was sent the stored result and answered.
      expect(history.at(-1)!.content).toEqual([{ type: "text", text: "done" }]);
    });

    it(`an interrupt of a command printing unstorable bytes (${c.name}) ends waiting`, async () => {
      const { agent, fake, setup } = await env(db);
      const d = uniqueSleep();
      fake.script({
        toolCalls: [
          {
            id: "x",
            name: "execute",
            args: { command: `${c.command}; sleep ${d}`, timeout: "60s" },
          },
        ],
      });
      const chatId = await startChat(db(), setup, "go");
      await until(() => runningWith(agent, `sleep ${d}`), 10_000);
      await new Promise((r) => setTimeout(r, 200)); // the output is in the agent's buffer
      await interrupt(db(), chatId);
      const { chat, history } = await settle(db(), chatId, 10_000);
      expect(chat.status).toBe("waiting");
      expect(results(history)).toEqual([expect.objectContaining({ status: "canceled" })]);
      expect(storable(history)).toBe(true);
    });
  }

  it("read_file of a file holding NUL bytes completes, and its result says what was replaced", async () => {
    const { agent, fake, setup } = await env(db);
    const file = path.join(agent.dir, "nul.bin");
    await writeFile(file, Buffer.from("one\u0000\ntwo\u0000\u0000\n", "utf8"));
    fake.script(
      { toolCalls: [{ id: "r", name: "read_file", args: { path: file } }] },
      { text: "read" },
    );
    const chatId = await startChat(db(), setup, "go");
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    const [r] = results(history);
    expect(r).toMatchObject({ status: "completed", kind: "file" });
    expect(String(r!.content)).toContain("one\ufffd");
    expect(r!.note).toContain("3 NUL bytes");
    expect(storable(history)).toBe(true);
  });

  it("edit_files of a file holding NUL bytes is applied; its diff is stored with them replaced", async () => {
    const { agent, fake, setup } = await env(db);
    const file = path.join(agent.dir, "nul.txt");
    await writeFile(file, "head\u0000\nalpha\nbeta\n");
    fake.script(
      {
        toolCalls: [
          {
            id: "e",
            name: "edit_files",
            args: { files: [{ path: file, edits: [{ old_text: "beta", new_text: "gamma" }] }] },
          },
        ],
      },
      { text: "edited" },
    );
    const chatId = await startChat(db(), setup, "go");
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    const [r] = results(history);
    expect(r).toMatchObject({ status: "applied" });
    expect(JSON.stringify(r)).toContain("head\ufffd");
    expect(r!.note).toContain("1 NUL byte was replaced with U+FFFD");
    expect(storable(history)).toBe(true);
  });

  it("a model that emits NUL and lone surrogates in text, reasoning and tool-call args is stored with them replaced", async () => {
    const { fake, setup } = await env(db);
    fake.script(
      {
        reasoning: `think${NUL}ing ${LONE_HIGH}`,
        text: `see${NUL} this ${LONE_LOW}`,
        toolCalls: [{ id: "x", name: "execute", args: { command: `echo a${NUL}b ${LONE_HIGH}` } }],
      },
      { text: `the end${NUL} ${LONE_HIGH}x` },
    );
    const chatId = await startChat(db(), setup, "go");
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    expect(storable(history)).toBe(true);
    const assistant = history.find((m) => m.role === "assistant")!;
    expect(assistant.content).toEqual([
      { type: "reasoning", text: "think\ufffding \ufffd" },
      { type: "text", text: "see\ufffd this \ufffd" },
      {
        type: "tool-call",
        tool_call_id: "x",
        tool_name: "execute",
        args: { command: "echo a\ufffdb \ufffd" },
      },
    ]);
    // The call ran with the stored arguments.
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", output: "a\ufffdb \ufffd\n" }),
    ]);
    expect(history.at(-1)!.content).toEqual([{ type: "text", text: "the end\ufffd \ufffdx" }]);
  });

  it("an interrupt of a model streaming NUL and lone surrogates ends waiting with the partial text stored", async () => {
    const buffer = new StreamBuffer();
    const { fake, setup } = await env(db, { buffer });
    fake.script({
      text: `a${NUL} b${LONE_HIGH} c d e f g h`,
      delayMs: 20,
      hangAfterChunks: 4,
    });
    const chatId = await startChat(db(), setup, "go");
    await until(() => buffer.parts(chatId).length >= 2, 10_000);
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    expect(storable(history)).toBe(true);
    const assistant = history.find((m) => m.role === "assistant")!;
    expect(JSON.stringify(assistant.content)).toContain("a\ufffd");
  });

  it("the demo model's `$ printf` of a NUL byte ends waiting with the result", async () => {
    const { setup } = await env(db, {
      resolveModel: async () => ({
        model: await createLanguageModel({ provider: "demo", model: "demo" }),
        prices: { inputPerMtokMicros: 0, outputPerMtokMicros: 0 },
      }),
    });
    const { id: chatId } = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    await sendMessage(db(), chatId, setup.userId, '$ printf "a\\000b"', "queue");
    const { chat, history } = await settle(db(), chatId, 10_000);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", output: "a\ufffdb" }),
    ]);
    expect(storable(history)).toBe(true);
  });
});
