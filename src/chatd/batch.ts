// What a tool batch commits, shared by generation and interrupt: one result message per call
// in call order, each with its own execution time when it ran, then one usage record billing
// the union of the billable intervals (CHATD.md 5, 9). And the tool call age the contract's
// headers carry, from the database clock.

import { unionMs, type Interval } from "./billing.ts";
import type { Queryable } from "./db/index.ts";
import type { NewMessage, ToolCallPart } from "./messages.ts";
import { truncateToolResult, type ToolResult } from "./tools/index.ts";

/** How long ago the message holding the calls was committed, on the database clock (ms). */
export async function toolCallAgeMs(q: Queryable, messageId: string): Promise<number> {
  const r = await q.query<{ age_ms: number }>(
    "SELECT (extract(epoch FROM now() - created_at) * 1000)::float8 AS age_ms FROM chat_messages WHERE id = $1",
    [messageId],
  );
  return r.rows[0]?.age_ms ?? 0;
}

/**
 * `intervals[i]` is call i's billable execution interval, undefined when nothing ran. A result
 * message's runtime is its call's own time (what the UI shows on its card); only the usage
 * record's, the union, is billed, so parallel calls are not counted twice.
 */
export function batchMessages(
  calls: ToolCallPart[],
  results: ToolResult[],
  budgetBytes: number,
  intervals: (Interval | undefined)[],
): NewMessage[] {
  const billed = intervals.filter((iv): iv is Interval => iv !== undefined);
  const messages: NewMessage[] = calls.map((call, i) => ({
    role: "tool",
    visibility: "both",
    runtimeMs: intervals[i] ? Math.max(0, Math.round(intervals[i].end - intervals[i].start)) : 0,
    content: [
      {
        type: "tool-result",
        tool_call_id: call.toolCallId,
        tool_name: call.toolName,
        result: truncateToolResult(results[i]!, budgetBytes),
        is_error: results[i]!.status === "error",
      },
    ],
  }));
  const billedMs = Math.round(unionMs(billed));
  if (billedMs > 0) {
    messages.push({
      role: "tool",
      visibility: "model",
      content: [{ type: "tool-batch-usage", billed_ms: billedMs, billed_calls: billed.length }],
      runtimeMs: billedMs,
    });
  }
  return messages;
}
