// Chat messages as chatd stores them (CHATD.md 2): a list of parts per message. A tool call
// is committed in an assistant message; its result is a tool message; a completed batch (and
// an interrupted compaction) adds one usage record that never reaches the API's list or the
// model.

export type MessageRole = "system" | "user" | "assistant" | "tool";
export type Visibility = "user" | "model" | "both";

export type MessagePart =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "tool-call"; tool_call_id: string; tool_name: string; args: unknown }
  | {
      type: "tool-result";
      tool_call_id: string;
      tool_name: string;
      result: unknown;
      is_error: boolean;
    }
  | { type: "tool-batch-usage"; billed_ms: number; billed_calls: number }
  /** The model time of a compaction interrupted before its boundary (docs/prompt.md). */
  | { type: "compaction-usage"; billed_ms: number }
  | CompactionPart;

/** The parts of usage records: billing only, never shown to people or sent to the model. */
export type UsagePart = Extract<MessagePart, { type: "tool-batch-usage" | "compaction-usage" }>;

export function isUsagePart(p: MessagePart): p is UsagePart {
  return p.type === "tool-batch-usage" || p.type === "compaction-usage";
}

/**
 * A usage record (CHATD.md 9): a tool batch's (role tool) or an interrupted compaction's (role
 * system, no boundary), holding usage parts only.
 */
export function isUsageRecord(m: Pick<ChatMessage, "role" | "content" | "boundary">): boolean {
  if (m.role === "tool") return m.content.every((p) => p.type === "tool-batch-usage");
  return (
    m.role === "system" &&
    !m.boundary &&
    m.content.length > 0 &&
    m.content.every((p) => p.type === "compaction-usage")
  );
}

/**
 * A compaction's summary of the conversation before it (a boundary message's one part): the
 * model's prompt starts here; the messages before stay whole for people and the API.
 */
export interface CompactionPart {
  type: "compaction";
  summary: string;
  /** How many messages the model no longer sees (those since the previous boundary). */
  messages_compacted: number;
  /** The last model step's prompt size before the compaction, when known (tokens). */
  prompt_tokens_before: number | null;
  /** Why: the prompt passed the threshold, the user asked, or the provider refused it. */
  reason: "threshold" | "requested" | "context_too_long";
  /** Whether the turn was over when it compacted (else the model continues from the summary). */
  turn_complete: boolean;
}

export interface ChatMessage {
  /** `chat_messages.id`: int64 as a decimal string, increasing within a chat. */
  id: string;
  chatId: string;
  role: MessageRole;
  visibility: Visibility;
  content: MessagePart[];
  createdBy: string | null;
  createdAt: Date;
  inputTokens: number;
  outputTokens: number;
  runtimeMs: number;
  costMicros: number;
  /** A model step's prompt size (input + cache read + cache write tokens), else null. */
  promptTokens: number | null;
  /** The context limit that prompt was measured against, else null. */
  contextLimit: number | null;
  /** A compaction boundary: the model's prompt starts at the latest one. */
  boundary: boolean;
}

/** A message to insert; the transition gives it its ID and time. */
export interface NewMessage {
  role: MessageRole;
  visibility: Visibility;
  content: MessagePart[];
  createdBy?: string | null;
  /** An edited user message's revision: the replaced message's plus one. */
  revision?: number;
  inputTokens?: number;
  outputTokens?: number;
  runtimeMs?: number;
  costMicros?: number;
  promptTokens?: number;
  contextLimit?: number;
  boundary?: boolean;
}

/**
 * Builds an assistant message's parts from streamed deltas, in stream order: text and
 * reasoning runs are closed by a tool call, so the message reads as the model produced it.
 */
export class AssistantParts {
  readonly #parts: MessagePart[] = [];
  #text = "";
  #reasoning = "";

  text(delta: string): void {
    this.#text += delta;
  }

  reasoning(delta: string): void {
    this.#reasoning += delta;
  }

  toolCall(call: { tool_call_id: string; tool_name: string; args: unknown }): void {
    this.#flush();
    this.#parts.push({ type: "tool-call", ...call });
  }

  /** The parts so far (closing any open text run); empty when nothing was streamed. */
  parts(): MessagePart[] {
    this.#flush();
    return [...this.#parts];
  }

  #flush(): void {
    if (this.#reasoning) this.#parts.push({ type: "reasoning", text: this.#reasoning });
    if (this.#text) this.#parts.push({ type: "text", text: this.#text });
    this.#text = "";
    this.#reasoning = "";
  }
}

export interface ToolCallPart {
  toolCallId: string;
  toolName: string;
  args: unknown;
}

/** The tool calls of an assistant message, in call order. */
export function toolCallsOf(message: ChatMessage): ToolCallPart[] {
  return message.role === "assistant" ? toolCallsIn(message.content) : [];
}

/** The tool calls among an assistant message's parts, in call order. */
export function toolCallsIn(content: MessagePart[]): ToolCallPart[] {
  const calls: ToolCallPart[] = [];
  for (const p of content) {
    if (p.type === "tool-call")
      calls.push({ toolCallId: p.tool_call_id, toolName: p.tool_name, args: p.args });
  }
  return calls;
}

/**
 * The latest assistant message and those of its tool calls that have no result yet
 * (chatd only ever runs unresolved calls of the latest assistant message: C3).
 */
export function unresolvedToolCalls(
  history: ChatMessage[],
): { message: ChatMessage; calls: ToolCallPart[] } | undefined {
  let last = -1;
  for (let i = history.length - 1; i >= 0; i--) {
    if (history[i]!.role === "assistant") {
      last = i;
      break;
    }
  }
  if (last < 0) return undefined;
  const message = history[last]!;
  const resolved = new Set<string>();
  for (const m of history.slice(last + 1)) {
    for (const p of m.content) if (p.type === "tool-result") resolved.add(p.tool_call_id);
  }
  const calls = toolCallsOf(message).filter((c) => !resolved.has(c.toolCallId));
  return calls.length > 0 ? { message, calls } : undefined;
}

export function rowToMessage(r: Record<string, unknown>): ChatMessage {
  return {
    id: r.id as string,
    chatId: r.chat_id as string,
    role: r.role as MessageRole,
    visibility: r.visibility as Visibility,
    content: r.content as MessagePart[],
    createdBy: (r.created_by as string | null) ?? null,
    createdAt: r.created_at as Date,
    inputTokens: r.input_tokens as number,
    outputTokens: r.output_tokens as number,
    runtimeMs: r.runtime_ms as number,
    costMicros: r.cost_micros as number,
    promptTokens:
      r.prompt_tokens === null || r.prompt_tokens === undefined ? null : Number(r.prompt_tokens),
    contextLimit:
      r.context_limit === null || r.context_limit === undefined ? null : Number(r.context_limit),
    boundary: r.boundary === true,
  };
}

/**
 * The messages of chat `chat` (an SQL expression) that match `where` (SQL over chat_messages as
 * `m`), as one JSON column in ID order, so a statement answers a row and its messages at once;
 * messagesFromJson reads it.
 */
export function messagesJsonSql(chat: string, where: string): string {
  return `(SELECT json_agg(m ORDER BY m.id) FROM chat_messages m WHERE m.chat_id = ${chat} AND ${where})`;
}

/** The messages of a messagesJsonSql column (null: none). */
export function messagesFromJson(value: unknown): ChatMessage[] {
  return ((value as Record<string, unknown>[] | null) ?? []).map((m) =>
    rowToMessage({ ...m, id: String(m.id), created_at: new Date(m.created_at as string) }),
  );
}

/** The turn is complete when the model's last word is an answer, not a tool call. */
export function turnComplete(history: ChatMessage[]): boolean {
  for (let i = history.length - 1; i >= 0; i--) {
    const m = history[i]!;
    if (isUsageRecord(m)) continue;
    if (m.boundary) return m.content.some((p) => p.type === "compaction" && p.turn_complete);
    return m.role === "assistant" && !m.content.some((p) => p.type === "tool-call");
  }
  return true; // empty history: nothing to answer
}
