// The record store (CONTRACT.md 5): it decides, for every request about a tool call, whether
// the agent runs it, replays it or refuses it. The argument that makes it correct: an agent
// that has been up since before a tool call was committed, and holds no record of it, never
// received it — so running it now is its first and only run.

import type { Answer } from "../answer.ts";
import type {
  ChatId,
  Clock,
  MessageId,
  ToolCallErrorCode,
  ToolCallUuid,
} from "../../contract/index.ts";
import { assertNever, toolCallUuid } from "../../contract/index.ts";

/** How much earlier than its uptime suggests the agent may have started (clock skew, restarts). */
export const AGE_MARGIN_MS = 2_000;

/** Identifies one tool call on the agent. */
export interface ToolCallKey {
  chatId: ChatId;
  messageId: MessageId;
  /** The unescaped provider tool call ID: records are keyed by these exact bytes. */
  toolCallId: Buffer;
}

/** What a handler running a tool call sees in its request context. */
export interface ToolCallContext {
  key: ToolCallKey;
  uuid: ToolCallUuid;
}

/** One tool call's request, recorded once and answered from then on. */
export class ToolCallRecord {
  /** The answer, written once, before `done` resolves. */
  #result: Answer | undefined;
  #resolve!: (a: Answer) => void;
  /** Resolves with the recorded answer once the one run publishes it. */
  readonly done: Promise<Answer> = new Promise((resolve) => (this.#resolve = resolve));

  constructor(
    /**
     * SHA-256 of the request's input, its 32 bytes as a Latin-1 string (a short string takes a
     * fraction of a Buffer's heap, and a store holds one per chat); never changes.
     */
    readonly inputHash: string,
    /** Store-clock instant the request entered: the run's start. Never changes. */
    readonly createdAt: number,
    /** True when a cancel inserted the record: the call never ran and never will. */
    readonly canceled: boolean,
  ) {}

  get result(): Answer | undefined {
    return this.#result;
  }

  /** Publishes the run's answer; later calls are ignored (the first answer wins). */
  publish(answer: Answer): void {
    if (this.#result !== undefined) return;
    this.#result = answer;
    this.#resolve(answer);
  }
}

interface ChatState {
  latestMessageId: MessageId;
  /** Records of the latest message only, by provider tool call ID bytes (latin1). */
  records: Map<string, ToolCallRecord>;
}

/** The outcome of the decision table of CONTRACT.md 5. */
export type Decision =
  | { kind: "refused"; code: ToolCallErrorCode }
  | { kind: "found"; record: ToolCallRecord }
  | { kind: "not_found" };

/** What the middleware does with a start, edit or write request. */
export type RunDecision =
  | { kind: "refused"; code: ToolCallErrorCode }
  | { kind: "replay"; record: ToolCallRecord }
  | { kind: "run"; record: ToolCallRecord };

/** What the cancel route does. */
export type CancelDecision =
  | { kind: "refused"; code: ToolCallErrorCode }
  | { kind: "never_started" }
  | { kind: "started"; record: ToolCallRecord };

function recordKey(toolCallId: Buffer): string {
  return toolCallId.toString("latin1");
}

export class ToolCallStore {
  readonly clock: Clock;
  /** The agent start: when this store began keeping records. */
  readonly startedAt: number;
  readonly #chats = new Map<ChatId, ChatState>();

  constructor(clock: Clock) {
    this.clock = clock;
    this.startedAt = clock.now();
  }

  /**
   * The decision table, in its order. `now` is the instant the request entered.
   * `agentUptime - AGE_MARGIN_MS <= age` is the "started after" test, written without
   * `age + margin` so the largest age cannot overflow.
   */
  decide(key: ToolCallKey, ageMs: number, now: number): Decision {
    const chat = this.#chats.get(key.chatId);
    if (chat && key.messageId < chat.latestMessageId)
      return { kind: "refused", code: "stale_tool_call" };
    const record =
      chat && key.messageId === chat.latestMessageId
        ? chat.records.get(recordKey(key.toolCallId))
        : undefined;
    if (record) return { kind: "found", record };
    if (now - this.startedAt - AGE_MARGIN_MS <= Math.max(ageMs, 0)) {
      return { kind: "refused", code: "agent_started_after_tool_call" };
    }
    return { kind: "not_found" };
  }

  /** Start, edit or write: run once, replay, or refuse. */
  beginRun(key: ToolCallKey, inputHash: Buffer, ageMs: number, now: number): RunDecision {
    const d = this.decide(key, ageMs, now);
    const hash = inputHash.toString("latin1");
    switch (d.kind) {
      case "refused":
        return d;
      case "found":
        if (d.record.canceled) return { kind: "refused", code: "tool_call_canceled" };
        if (d.record.inputHash !== hash) return { kind: "refused", code: "input_mismatch" };
        return { kind: "replay", record: d.record };
      case "not_found":
        return {
          kind: "run",
          record: this.#insert(key, new ToolCallRecord(hash, now, false)),
        };
      default:
        return assertNever(d);
    }
  }

  /** Cancel: a call never received is recorded as canceled, so a start in transit never runs. */
  beginCancel(key: ToolCallKey, ageMs: number, now: number): CancelDecision {
    const d = this.decide(key, ageMs, now);
    switch (d.kind) {
      case "refused":
        return d;
      case "found":
        return d.record.canceled
          ? { kind: "never_started" }
          : { kind: "started", record: d.record };
      case "not_found":
        this.#insert(key, new ToolCallRecord("", now, true));
        return { kind: "never_started" };
      default:
        return assertNever(d);
    }
  }

  /** The key is in its chat's latest message and has a record. */
  current(key: ToolCallKey): boolean {
    const chat = this.#chats.get(key.chatId);
    return (
      chat !== undefined &&
      chat.latestMessageId === key.messageId &&
      chat.records.has(recordKey(key.toolCallId))
    );
  }

  /**
   * The process `processId` of `chatId` was started by a tool call that is still current
   * (CONTRACT.md 7, reaping). Scans only the chat's latest message, so it costs no index.
   */
  isCurrentProcess(processId: string, chatId: string | undefined): boolean {
    const chat = chatId === undefined ? undefined : this.#chats.get(chatId as ChatId);
    if (!chat) return false;
    for (const id of chat.records.keys()) {
      if (
        toolCallUuid(chatId as ChatId, chat.latestMessageId, Buffer.from(id, "latin1")) ===
        processId
      )
        return true;
    }
    return false;
  }

  /** Number of chats with state; state grows with chats, never with tool calls. */
  get chatCount(): number {
    return this.#chats.size;
  }

  /** Inserting for a newer message drops every older record of the chat; only inserts raise it. */
  #insert(key: ToolCallKey, record: ToolCallRecord): ToolCallRecord {
    let chat = this.#chats.get(key.chatId);
    if (!chat || key.messageId > chat.latestMessageId) {
      chat = { latestMessageId: key.messageId, records: new Map() };
      this.#chats.set(key.chatId, chat);
    }
    chat.records.set(recordKey(key.toolCallId), record);
    return record;
  }
}

export function contextFor(key: ToolCallKey): ToolCallContext {
  return { key, uuid: toolCallUuid(key.chatId, key.messageId, key.toolCallId) };
}
