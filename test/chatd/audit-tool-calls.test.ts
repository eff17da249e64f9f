// Tool calls in the audit log (issue 11, item 10): when the worker sends a batch to the
// workspace agent, each call is recorded as `tool.call` with the chat's owner, the chat, the
// tool and its command or path — never file contents. (Text the database cannot store is made
// storable: src/chatd/audit-tool-calls.test.ts.)

import { expect, it } from "vitest";
import { startBatch } from "../../src/chatd/batch-start.ts";
import type { ChatMessage } from "../../src/chatd/messages.ts";
import { createChat, loadChat, sendMessage } from "../../src/chatd/transitions/index.ts";
import { settle, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env } = useLoops();

describeDatabases("tool call audit", (db) => {
  it("each call of a batch the worker sends is audited with its tool and command or path, not file contents", async () => {
    const { fake, setup, agent } = await env(db);
    fake.script(
      {
        toolCalls: [
          { id: "call_1", name: "execute", args: { command: "echo hi there" } },
          {
            id: "call_2",
            name: "write_file",
            args: { path: `${agent.dir}/notes.txt`, content: "secret file content" },
          },
        ],
      },
      {
        toolCalls: [{ id: "call_3", name: "read_file", args: { path: `${agent.dir}/notes.txt` } }],
      },
      { text: "Done." },
    );
    const { id: chatId } = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    await sendMessage(db(), chatId, setup.userId, "go", "queue");
    expect((await settle(db(), chatId)).chat.status).toBe("waiting");
    const r = await db().query<{
      user_id: string;
      target: string;
      details: Record<string, unknown>;
    }>("SELECT user_id, target, details FROM audit_log WHERE action = 'tool.call' ORDER BY id");
    expect(r.rows.map((e) => [e.user_id, e.target])).toEqual([
      [setup.userId, chatId],
      [setup.userId, chatId],
      [setup.userId, chatId],
    ]);
    expect(r.rows.map((e) => e.details)).toEqual([
      expect.objectContaining({
        tool: "execute",
        tool_call_id: "call_1",
        command: "echo hi there",
      }),
      expect.objectContaining({
        tool: "write_file",
        tool_call_id: "call_2",
        path: `${agent.dir}/notes.txt`,
      }),
      expect.objectContaining({
        tool: "read_file",
        tool_call_id: "call_3",
        path: `${agent.dir}/notes.txt`,
      }),
    ]);
    // Each entry names the message holding its call (the first start rides on its commit).
    const { history } = await settle(db(), chatId);
    const holder = new Map(
      history.flatMap((m) =>
        m.content.flatMap((p) => (p.type === "tool-call" ? [[p.tool_call_id, m.id] as const] : [])),
      ),
    );
    expect(r.rows.map((e) => e.details.message_id)).toEqual(
      ["call_1", "call_2", "call_3"].map((id) => holder.get(id)),
    );
    expect(holder.size).toBe(3);
    expect(JSON.stringify(r.rows)).not.toContain("secret file content");
  });

  it("a batch started again (a retried or taken-over task) is recorded again, for the same message; a lost workspace records nothing", async () => {
    const { setup } = await env(db);
    const { id: chatId } = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    const chat = (await loadChat(db(), chatId))!;
    const [message] = await db()
      .query<{ id: string }>(
        `INSERT INTO chat_messages (chat_id, role, visibility, content) VALUES ($1, 'assistant', 'both', '[]')
       RETURNING id::text`,
        [chatId],
      )
      .then((r) => r.rows);
    const calls = [{ toolCallId: "c1", toolName: "execute", args: { command: "make" } }];
    const m = { id: message!.id } as ChatMessage;
    const started = await startBatch(db(), chat, m, calls, { audit: true });
    expect(started.access).toEqual({ status: "usable" });
    expect(started.ageMs).toBeGreaterThanOrEqual(0);
    await startBatch(db(), chat, m, calls, { audit: true }); // and once more
    await db().query("UPDATE workspaces SET shared = false, owner_id = NULL WHERE id = $1", [
      setup.workspaceId,
    ]);
    const lost = await startBatch(db(), chat, m, calls, { audit: true });
    expect(lost.access).toEqual({ status: "lost", why: "unshared" });
    const r = await db().query<{ details: Record<string, unknown> }>(
      "SELECT details FROM audit_log WHERE action = 'tool.call' AND target = $1",
      [chatId],
    );
    const entry = { tool: "execute", tool_call_id: "c1", command: "make", message_id: message!.id };
    expect(r.rows.map((e) => e.details)).toEqual([entry, entry]);
  });
});
