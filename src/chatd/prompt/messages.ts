// History → the AI SDK's model messages (the system prompt, system.ts, goes in the step's
// `system`). Only what the model should see goes in: messages visible to the model, from the
// latest compaction boundary on (its summary first), without usage records (CHATD.md 9).

import type { AssistantContent, ModelMessage, ToolContent } from "ai";
import { isUsageRecord, type ChatMessage } from "../messages.ts";

/** How the summary of a compacted conversation opens, as the model reads it. */
export const SUMMARY_LEAD =
  "The conversation so far was compacted; this is its summary (the earlier messages are not shown):";

/** The messages from the latest boundary on (all of them when there is none). */
export function sinceBoundary(history: ChatMessage[]): ChatMessage[] {
  for (let i = history.length - 1; i >= 0; i--) if (history[i]!.boundary) return history.slice(i);
  return history;
}

export function toModelMessages(history: ChatMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of sinceBoundary(history)) {
    if (m.visibility === "user" || isUsageRecord(m)) continue;
    if (m.boundary) {
      const summary = m.content.flatMap((p) => (p.type === "compaction" ? [p.summary] : []));
      out.push({ role: "user", content: `${SUMMARY_LEAD}\n\n${summary.join("\n")}` });
      continue;
    }
    switch (m.role) {
      case "system":
      case "user": {
        const text = m.content.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n");
        out.push({ role: m.role, content: text });
        break;
      }
      case "assistant": {
        const content: Exclude<AssistantContent, string> = [];
        for (const p of m.content) {
          if (p.type === "text" && p.text !== "") content.push({ type: "text", text: p.text });
          else if (p.type === "reasoning") content.push({ type: "reasoning", text: p.text });
          else if (p.type === "tool-call") {
            content.push({
              type: "tool-call",
              toolCallId: p.tool_call_id,
              toolName: p.tool_name,
              input: p.args,
            });
          }
        }
        if (content.length > 0) out.push({ role: "assistant", content });
        break;
      }
      case "tool": {
        const content: ToolContent = [];
        for (const p of m.content) {
          if (p.type !== "tool-result") continue;
          content.push({
            type: "tool-result",
            toolCallId: p.tool_call_id,
            toolName: p.tool_name,
            output: { type: "json", value: p.result as never },
          });
        }
        if (content.length > 0) out.push({ role: "tool", content });
        break;
      }
    }
  }
  return out;
}
