// What a runner holds of its chat between tasks: the chat row, its history since the
// compaction boundary and its context snapshot, as the database had them after the runner's
// own last read or fenced write. A task starts from it without reading (docs/benchmarks.md).
// It is safe because every write of a task is fenced in the database: a held view that went
// stale through a change whose notification was lost fails the next write's fence, and the
// runner reads again. It is dropped on any change the runner did not write itself (a
// notification, or a write that shows a version in between), and the chat row is re-read
// once it is `maxAgeMs` old, so even a lost notification goes unseen for that long at most.

import type { Clock } from "../../contract/index.ts";
import type { Chat, Fence } from "../chats.ts";
import type { Queryable } from "../db/index.ts";
import type { MessageFeed } from "../message-feed.ts";
import type { ChatMessage } from "../messages.ts";
import {
  loadSnapshot,
  type ContextPrefetch,
  type ContextSnapshot,
  type KeptSnapshot,
} from "../prompt/context.ts";
import type { StepAhead } from "../step-ahead.ts";
import type { WorkspaceAccess } from "../workspace-access.ts";
import type { ClaimedStart } from "./claim.ts";
import { changeOf, type ChatChange } from "./change.ts";
import type { Written } from "./fenced.ts";

/** What the claim read for taking the first snapshot (HeldChat.snapshotInputs). */
interface SnapshotInputs {
  chat: Chat;
  access: WorkspaceAccess;
  organization: string | null;
  prefetch?: ContextPrefetch;
}

/** How long a held chat row is used before it is read again. */
export const HELD_CHAT_MS = 2_000;

export class HeldChat {
  #chat: Chat | undefined;
  #history: ChatMessage[] | undefined;
  /** The kept context snapshot: null when the chat has none yet, undefined when not read. */
  #snapshot: KeptSnapshot | null | undefined;
  #readAt = 0;
  /** The row of this runner's last write, when it recorded the next model call's attempt. */
  #reserved: Chat | undefined;
  /** What the claim read for taking the first snapshot, while the claimed row is held. */
  #claimed: SnapshotInputs | undefined;
  /** A snapshot taken for the next model step, not kept yet (it is kept with that step). */
  #unkept: ContextSnapshot | undefined;
  /** The start that rode on the commit of the latest message's calls, until its batch runs. */
  #batch: { messageId: string; access: WorkspaceAccess; audit: boolean; at: number } | undefined;
  /** A model step sent as this runner's last write committed, for the task that write led to. */
  #ahead: { step: StepAhead; historyVersion: string } | undefined;
  /** The highest snapshot version a notification announced. */
  #announced = 0n;
  /** The highest snapshot version this runner read or wrote itself (kept through a drop). */
  #seen = 0n;

  constructor(
    private readonly clock: Clock,
    private readonly maxAgeMs = HELD_CHAT_MS,
    /** Where this runner's commits of history go for the replica's streams (message-feed.ts). */
    private readonly feed?: MessageFeed,
  ) {}

  /**
   * A fenced write is under way: answers its end, called with what it wrote once it committed
   * (the feed then has its messages, and tells its change: a fenced write sends no
   * notification), or without when it wrote nothing.
   */
  committing(fence: Fence): (w?: Written) => void {
    const end = this.feed?.committing(fence.chatId);
    if (!end) return () => undefined;
    return (w) =>
      end(
        w && w.messages.length > 0
          ? { before: fence.historyVersion, after: w.chat.historyVersion, messages: w.messages }
          : undefined,
        w && changeOf(w.chat),
      );
  }

  /** The held chat row if it is recent and nothing newer was announced. */
  get chat(): Chat | undefined {
    const c = this.#chat;
    if (!c || this.clock.now() - this.#readAt > this.maxAgeMs) return undefined;
    if (this.#announced > BigInt(c.snapshotVersion)) return undefined;
    return c;
  }

  /** The chat and history a task fenced at `fence` starts from, if held. */
  forTask(fence: Fence): { chat: Chat; history: ChatMessage[] } | undefined {
    const chat = this.chat;
    if (!chat || !this.#history || chat.historyVersion !== fence.historyVersion) return undefined;
    return { chat, history: this.#history };
  }

  get snapshot(): KeptSnapshot | null | undefined {
    return this.chat ? this.#snapshot : undefined;
  }

  set snapshot(kept: KeptSnapshot | null | undefined) {
    this.#snapshot = kept;
  }

  /** The chat row as just read (its history too, when read with it). */
  read(chat: Chat, history?: ChatMessage[]): void {
    // What is held stays only if the chat did not change since (its versions say so).
    if (this.#chat?.snapshotVersion !== chat.snapshotVersion) this.#snapshot = undefined;
    if (history) this.#history = history;
    else if (this.#chat?.historyVersion !== chat.historyVersion) this.#history = undefined;
    this.#chat = chat;
    this.#readAt = this.clock.now();
    this.#saw(chat);
  }

  #saw(chat: Chat): void {
    const v = BigInt(chat.snapshotVersion);
    if (v > this.#seen) this.#seen = v;
  }

  /**
   * Whether a change notification tells of a version newer than any this runner read or wrote:
   * one of its own writes, or an older change, arriving late, says nothing new.
   */
  isNews(change: ChatChange): boolean {
    return BigInt(change.snapshot_version) > this.#seen;
  }

  /**
   * The chat as claimed, with what the claim read for its runner (ClaimedStart); a running
   * chat's claim counted the attempt of the model call that may come next.
   */
  claimed(chat: Chat, start: ClaimedStart): void {
    this.read(chat, start.history);
    this.#snapshot = start.snapshot;
    this.#claimed = {
      chat,
      access: start.access,
      organization: start.organization,
      ...(start.prefetch && { prefetch: start.prefetch }),
    };
    this.#reserved = chat.status === "running" ? chat : undefined;
    if (start.ahead) this.sentAhead(start.ahead, chat.historyVersion);
  }

  /**
   * What the claim read for taking the first snapshot, if the claimed row is still held, with
   * the agent's context asked for alongside the claim, if it was (handed out once).
   */
  snapshotInputs(): Omit<SnapshotInputs, "chat"> | undefined {
    const c = this.#claimed;
    if (!c || this.chat !== c.chat) return undefined;
    const { prefetch, ...inputs } = c;
    this.#claimed = inputs;
    return { ...inputs, ...(prefetch && { prefetch }) };
  }

  /** A snapshot taken for the next model step and not kept yet; kept with it. */
  get unkept(): ContextSnapshot | undefined {
    return this.chat ? this.#unkept : undefined;
  }

  set unkept(snapshot: ContextSnapshot | undefined) {
    this.#unkept = snapshot;
  }

  /** The batch of message `messageId` was started with the commit of its calls (batch-start.ts). */
  startedBatch(messageId: string, access: WorkspaceAccess, audit: boolean): void {
    this.#batch = { messageId, access, audit, at: this.clock.now() };
  }

  /**
   * The start of message `messageId`'s batch, once, if it rode on the commit of the calls no
   * more than `maxAgeMs` ago: its access, whether it wrote the audit entries, and the message's
   * age. (Kept through a drop: its audit entries are for the send that comes next.)
   */
  takeBatchStart(
    messageId: string,
  ): { access: WorkspaceAccess; audit: boolean; ageMs: number } | undefined {
    const b = this.#batch;
    this.#batch = undefined;
    const ageMs = b ? Math.max(0, this.clock.now() - b.at) : 0;
    if (!b || b.messageId !== messageId || ageMs > this.maxAgeMs) return undefined;
    return { access: b.access, audit: b.audit, ageMs };
  }

  /**
   * A model step sent while this runner's write that left history at `historyVersion`
   * committed (step-ahead.ts), for the next task; one at a time.
   */
  sentAhead(step: StepAhead, historyVersion: string): void {
    this.dropStepAhead();
    this.#ahead = { step, historyVersion };
  }

  /** The step sent ahead for a task fenced at `fence`, once; another task's is dropped. */
  takeStepAhead(fence: Fence): StepAhead | undefined {
    const a = this.#ahead;
    this.#ahead = undefined;
    if (a?.historyVersion === fence.historyVersion) return a.step;
    a?.step.drop();
    return undefined;
  }

  /** No task takes the step sent ahead (an interruption, the runner's end): it is aborted. */
  dropStepAhead(): void {
    this.#ahead?.step.drop();
    this.#ahead = undefined;
  }

  /** The history of the held `chat`, read on its own (kept only while that chat is held). */
  holdHistory(chat: Chat, history: ChatMessage[]): void {
    if (this.#chat === chat) this.#history = history;
  }

  /**
   * After this runner's own fenced write; `reserved`: it recorded the attempt of the model call
   * that comes next, which `takeAttempt` then answers once.
   */
  wrote(w: Written, reserved = false): void {
    this.#saw(w.chat);
    const before = this.#chat;
    if (!before || BigInt(w.chat.snapshotVersion) !== BigInt(before.snapshotVersion) + 1n) {
      // Another transition came in between: what else it changed is not known here.
      this.drop();
      return;
    }
    this.#reserved = reserved ? w.chat : undefined;
    this.#chat = w.chat;
    this.#readAt = this.clock.now();
    if (this.#history && w.messages.length > 0) {
      const from = w.messages.findLastIndex((m) => m.boundary);
      this.#history = from >= 0 ? w.messages.slice(from) : [...this.#history, ...w.messages];
    }
  }

  /** A change notification: one this runner did not write drops what is held. */
  changed(change: ChatChange): void {
    const v = BigInt(change.snapshot_version);
    if (v > this.#announced) this.#announced = v;
  }

  /**
   * The attempt a model call fenced at `fence` makes, if this runner's last write recorded it
   * and nothing changed since (the held chat is that write's row, and recent); once.
   */
  takeAttempt(fence: Fence): number | undefined {
    const r = this.#reserved;
    this.#reserved = undefined;
    if (!r || this.chat !== r || r.historyVersion !== fence.historyVersion) return undefined;
    if (fence.generationAttempt !== undefined) return undefined;
    return r.generationAttempt;
  }

  drop(): void {
    this.dropStepAhead();
    this.#reserved = undefined;
    this.#claimed?.prefetch?.drop();
    this.#claimed = undefined;
    this.#unkept = undefined;
    this.#chat = undefined;
    this.#history = undefined;
    this.#snapshot = undefined;
  }
}

/** The chat's kept context snapshot: `held`'s when it has it, else read (and then held). */
export async function keptSnapshot(
  q: Queryable,
  chatId: string,
  held?: HeldChat,
): Promise<KeptSnapshot | undefined> {
  const h = held?.snapshot;
  if (h !== undefined) return h ?? undefined;
  const kept = await loadSnapshot(q, chatId);
  if (held?.chat) held.snapshot = kept ?? null;
  return kept;
}
