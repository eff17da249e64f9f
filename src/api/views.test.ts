import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { rowToMessage, type Visibility } from "../chatd/messages.ts";
import { acquire, commitStep, createChat } from "../chatd/transitions/index.ts";
import { isVisibleMessage, messageView, VISIBLE_MESSAGES_SQL } from "./views.ts";

describeDatabases("the messages a person sees", (db) => {
  const newChat = async (): Promise<string> => {
    const userId = randomUUID();
    await db().query(
      "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'member', 'x')",
      [userId, `${userId}@test`],
    );
    const chat = await createChat(db(), {
      ownerId: userId,
      workspaceId: null,
      modelConfigId: null,
    });
    return chat.id;
  };

  it("isVisibleMessage keeps exactly the rows VISIBLE_MESSAGES_SQL answers", async () => {
    const chatId = await newChat();
    for (const visibility of ["user", "model", "both"] satisfies Visibility[]) {
      for (const deleted of [false, true]) {
        await db().query(
          "INSERT INTO chat_messages (chat_id, role, visibility, content, deleted) VALUES ($1, 'assistant', $2, '[]', $3)",
          [chatId, visibility, deleted],
        );
      }
    }
    const all = await db().query<{ id: string; visibility: Visibility; deleted: boolean }>(
      "SELECT * FROM chat_messages WHERE chat_id = $1 ORDER BY id",
      [chatId],
    );
    expect(all.rows).toHaveLength(6);
    const visible = await db().query<{ id: string }>(VISIBLE_MESSAGES_SQL, [chatId, "0"]);
    expect(visible.rows.map((r) => r.id)).toEqual(
      all.rows.filter((r) => isVisibleMessage(r)).map((r) => r.id),
    );
    expect(visible.rows).toHaveLength(2);
    // A message in hand has no `deleted`: it was just inserted.
    expect(isVisibleMessage({ visibility: "both" })).toBe(true);
    expect(isVisibleMessage({ visibility: "model" })).toBe(false);
  });

  it("a fenced write's messages, as it answers them, are the ones a read answers", async () => {
    const chatId = await newChat();
    await db().query("UPDATE chats SET status = 'running' WHERE id = $1", [chatId]);
    const [claimed] = await acquire(db(), randomUUID(), { leaseMs: 60_000, limit: 1 });
    const written = await commitStep(
      db(),
      {
        chatId,
        workerId: claimed!.chat.workerId!,
        runnerId: claimed!.runnerId,
        status: "running",
        historyVersion: claimed!.chat.historyVersion,
      },
      [
        {
          role: "assistant",
          visibility: "both",
          runtimeMs: 12.4,
          content: [
            { type: "reasoning", text: "think \u0000 twice" },
            { type: "text", text: "ünïcode ✓" },
            {
              type: "tool-call",
              tool_call_id: "c1",
              tool_name: "execute",
              args: { zeta: 1, alpha: [1.5, null, "x"], nested: { b: true, a: 1e21 } },
            },
          ],
        },
        { role: "tool", visibility: "user", content: [{ type: "text", text: "shown" }] },
      ],
    );
    const read = await db().query(VISIBLE_MESSAGES_SQL, [chatId, "0"]);
    expect(written.messages.filter((m) => isVisibleMessage(m)).map(messageView)).toEqual(
      read.rows.map((r) => messageView(rowToMessage(r))),
    );
  });
});
