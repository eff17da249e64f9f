import { APICallError } from "ai";
import { describe, expect, it } from "vitest";
import { turnComplete, type ChatMessage, type MessagePart } from "../messages.ts";
import {
  compactionDue,
  compactionRequest,
  isContextTooLong,
  toolResultBudgetBytes,
} from "./compaction.ts";
import { toModelMessages } from "./messages.ts";
import { systemPrompt } from "./system.ts";
import { testMessage } from "../../../test/support/messages.ts";

let nextId = 1;
function msg(
  role: ChatMessage["role"],
  content: MessagePart[],
  o: Partial<ChatMessage> = {},
): ChatMessage {
  return testMessage({ id: String(nextId++), chatId: "c", role, content, ...o });
}
const text = (t: string): MessagePart[] => [{ type: "text", text: t }];
const boundary = (summary: string) =>
  msg(
    "system",
    [
      {
        type: "compaction",
        summary,
        messages_compacted: 2,
        prompt_tokens_before: null,
        reason: "threshold",
        turn_complete: true,
      },
    ],
    { boundary: true },
  );
const budget = { limitTokens: 1_000, thresholdPercent: 70 };

describe("compaction rules", () => {
  it("is due once the latest step since the boundary reached the threshold, not before", () => {
    const under = [msg("user", text("a")), msg("assistant", text("b"), { promptTokens: 699 })];
    expect(compactionDue(under, undefined, budget)).toBeUndefined();
    const over = [msg("user", text("a")), msg("assistant", text("b"), { promptTokens: 700 })];
    expect(compactionDue(over, undefined, budget)).toBe("threshold");
    expect(compactionDue(over, undefined, { ...budget, thresholdPercent: 100 })).toBeUndefined();
    // After a boundary only the steps after it count; with none, nothing is due.
    expect(compactionDue([...over, boundary("s")], undefined, budget)).toBeUndefined();
    expect(compactionDue([...over, boundary("s")], "requested", budget)).toBeUndefined();
    expect(compactionDue(under, "requested", budget)).toBe("requested");
  });

  it("the model's prompt starts at the latest boundary, with its summary first", () => {
    const history = [
      msg("user", text("old question")),
      msg("assistant", text("old answer")),
      boundary("SUMMARY"),
      msg("user", text("new question")),
    ];
    expect(toModelMessages(history)).toEqual([
      { role: "user", content: expect.stringMatching(/compacted.*\n\nSUMMARY$/s) },
      { role: "user", content: "new question" },
    ]);
    const req = compactionRequest(history, 1_000);
    expect(req.compacted).toBe(1);
    expect(JSON.stringify(req.messages)).toContain("SUMMARY");
    expect(JSON.stringify(req.messages)).not.toContain("old question");
  });

  it("usage records are no part of the conversation: not in the prompt, the summary request or the turn", () => {
    const usage = [
      msg("tool", [{ type: "tool-batch-usage", billed_ms: 5, billed_calls: 1 }], {
        visibility: "model",
      }),
      msg("system", [{ type: "compaction-usage", billed_ms: 7 }], { visibility: "model" }),
    ];
    const history = [msg("user", text("question")), msg("assistant", text("answer")), ...usage];
    expect(toModelMessages(history)).toEqual([
      { role: "user", content: "question" },
      { role: "assistant", content: [{ type: "text", text: "answer" }] },
    ]);
    expect(compactionRequest(history, 1_000).compacted).toBe(2);
    expect(turnComplete(history)).toBe(true);
    // Only the answer after an interrupted compaction completes the turn, not its record.
    const calling = msg("assistant", [
      { type: "tool-call", tool_call_id: "c", tool_name: "execute", args: {} },
    ]);
    expect(turnComplete([calling, usage[1]!])).toBe(false);
  });

  it("the tool result budget is a tenth of the context, between 2 KiB and the server's", () => {
    expect(toolResultBudgetBytes(200_000, 32 * 1024)).toBe(32 * 1024);
    expect(toolResultBudgetBytes(8_000, 32 * 1024)).toBe(3_200);
    expect(toolResultBudgetBytes(1_000, 32 * 1024)).toBe(2 * 1024);
  });

  it("recognises providers' context-length refusals and nothing else", () => {
    const err = (statusCode: number, message: string) =>
      new APICallError({ message, url: "u", requestBodyValues: {}, statusCode });
    expect(isContextTooLong(err(400, "This model's maximum context length is 8192 tokens."))).toBe(
      true,
    );
    expect(isContextTooLong(err(400, "prompt is too long: 210000 tokens > 200000 maximum"))).toBe(
      true,
    );
    expect(isContextTooLong(err(400, "Invalid 'messages': missing content"))).toBe(false);
    expect(isContextTooLong(err(500, "maximum context length"))).toBe(false);
  });

  it("the system prompt without a snapshot says the chat has no workspace", () => {
    expect(systemPrompt(null)).toContain("# Environment\n\nThis chat has no workspace");
  });
});
