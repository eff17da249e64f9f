// History → the AI SDK's model messages (the system prompt goes in streamText's `system`). Only what the model should see goes in: messages
// visible to the model, without usage records (CHATD.md 9: they never reach the model).

import type { AssistantContent, ModelMessage, ToolContent } from "ai";
import type { ChatMessage } from "./messages.ts";

export const SYSTEM_PROMPT =
  "You are a coding agent working in a workspace through tools. Tool results are JSON objects " +
  "with a `status` field; read it before you act. A result with status `unknown` means the " +
  "outcome could not be learned: check before you repeat anything with a side effect.";

export function toModelMessages(history: ChatMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of history) {
    if (m.visibility === "user") continue;
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
