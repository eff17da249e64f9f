// A chat's usage totals (CHATD.md 9): model runtime from assistant messages, tool runtime and
// billed calls from the tool-batch-usage records, tokens and cost from every message. Deleted
// messages count too: discarding history by an edit does not undo what was spent.

import type { FastifyInstance } from "fastify";
import type { ApiContext } from "./app.ts";
import { caller } from "./auth.ts";
import { ownedChat } from "./chats.ts";
import { IdParams, parse } from "./errors.ts";

export interface ChatUsage {
  runtime_ms: number;
  model_runtime_ms: number;
  tool_runtime_ms: number;
  billed_calls: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
}

/** The billing record of a tool batch: role tool, visibility model, a tool-batch-usage part. */
function usageRecord(m: string): string {
  return `${m}.role = 'tool' AND ${m}.visibility = 'model' AND ${m}.content @> '[{"type": "tool-batch-usage"}]'`;
}

// Sums of int4 are int8, which the drivers answer as decimal strings.
const TOTALS_SQL = `SELECT
    COALESCE(SUM(runtime_ms) FILTER (WHERE role = 'assistant'), 0) AS model_runtime_ms,
    COALESCE(SUM(runtime_ms) FILTER (WHERE ${usageRecord("m")}), 0) AS tool_runtime_ms,
    COALESCE(SUM(input_tokens), 0) AS input_tokens,
    COALESCE(SUM(output_tokens), 0) AS output_tokens,
    COALESCE(SUM(cost_micros), 0) AS cost_micros
  FROM chat_messages m WHERE m.chat_id = $1`;

const BILLED_CALLS_SQL = `SELECT COALESCE(SUM((p.part ->> 'billed_calls')::bigint), 0) AS billed_calls
  FROM chat_messages m CROSS JOIN LATERAL jsonb_array_elements(m.content) AS p(part)
  WHERE m.chat_id = $1 AND ${usageRecord("m")}
    AND p.part ->> 'type' = 'tool-batch-usage'`;

export async function chatUsage(ctx: ApiContext, chatId: string): Promise<ChatUsage> {
  const totals = (await ctx.db.query(TOTALS_SQL, [chatId])).rows[0]!;
  const calls = (await ctx.db.query(BILLED_CALLS_SQL, [chatId])).rows[0]!;
  const model = Number(totals.model_runtime_ms);
  const tool = Number(totals.tool_runtime_ms);
  return {
    runtime_ms: model + tool,
    model_runtime_ms: model,
    tool_runtime_ms: tool,
    billed_calls: Number(calls.billed_calls),
    input_tokens: Number(totals.input_tokens),
    output_tokens: Number(totals.output_tokens),
    cost_micros: Number(totals.cost_micros),
  };
}

export function usageRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/api/v1/chats/:id/usage", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    await ownedChat(ctx, user, id);
    return chatUsage(ctx, id);
  });
}
