// Tool calls in the audit log (issue 11, item 10): when the worker sends a batch to the
// workspace agent, each call is recorded as `tool.call` with the chat's owner, the chat, the
// tool and its command or path — never file contents. (Text the database cannot store is made
// storable: src/chatd/audit-tool-calls.test.ts.)

import { expect, it } from "vitest";
import { createChat, sendMessage } from "../../src/chatd/transitions/index.ts";
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
    expect(JSON.stringify(r.rows)).not.toContain("secret file content");
  });
});
