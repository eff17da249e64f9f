// Cost per message through the real loop: each assistant message the worker commits costs its
// reported tokens at its model config's prices (integer micro-dollars per million tokens).

import { expect, it } from "vitest";
import { sendMessage, createChat } from "../../src/chatd/transitions/index.ts";
import { settle, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";

const { env } = useLoops();

describeDatabases("cost per message", (db) => {
  it("an assistant message's cost_micros is its tokens at the model's prices", async () => {
    const { fake, setup } = await env(db);
    // $3 per million input tokens, $15 per million output tokens.
    await db().query(
      `UPDATE model_configs SET input_price_per_mtok_micros = 3000000,
         output_price_per_mtok_micros = 15000000 WHERE id = $1`,
      [setup.modelConfigId],
    );
    fake.script(
      {
        toolCalls: [{ id: "call_1", name: "execute", args: { command: "echo hi" } }],
        usage: { prompt_tokens: 1000, completion_tokens: 200 },
      },
      { text: "Done.", usage: { prompt_tokens: 2001, completion_tokens: 33 } },
    );
    const { id } = await createChat(db(), {
      ownerId: setup.userId,
      workspaceId: setup.workspaceId,
      modelConfigId: setup.modelConfigId,
    });
    await sendMessage(db(), id, setup.userId, "run it", "queue");
    const { chat } = await settle(db(), id);
    expect(chat.status).toBe("waiting");
    const r = await db().query<{
      input_tokens: number;
      output_tokens: number;
      cost_micros: number;
    }>(
      `SELECT input_tokens, output_tokens, cost_micros FROM chat_messages
       WHERE chat_id = $1 AND role = 'assistant' ORDER BY id`,
      [id],
    );
    expect(r.rows).toEqual([
      // 1000 × 3 + 200 × 15 = 6000 micro-dollars
      { input_tokens: 1000, output_tokens: 200, cost_micros: 6000 },
      // 2001 × 3 + 33 × 15 = 6003 + 495 = 6498 micro-dollars
      { input_tokens: 2001, output_tokens: 33, cost_micros: 6498 },
    ]);
    // Other messages cost nothing.
    const rest = await db().query<{ n: number }>(
      "SELECT count(*)::int AS n FROM chat_messages WHERE chat_id = $1 AND role <> 'assistant' AND cost_micros <> 0",
      [id],
    );
    expect(rest.rows[0]!.n).toBe(0);
  });
});
