// What this replica commits, for its own event streams (docs/benchmarks.md). A commit that moves
// a chat's history publishes what it moved — the history version before and after, the messages
// it inserted — once it has committed, and a stream whose messages are complete up to "before"
// sends them without reading (src/api/stream.ts). A commit is announced here before it is made
// (`committing`), so a stream that hears of it first waits for it rather than reading. Only the
// chats a stream on this replica follows are held, at most FEED_ENTRIES_PER_CHAT commits each,
// none older than FEED_MS; anything else (another replica's commit, an edit, an entry dropped)
// the stream reads, as it did without the feed.
//
// A runner's fenced writes send no notification (transitions/fenced.ts): their change is told
// here, to the streams of this replica and to the owner's parts route, which passes it on to the
// relays of other replicas' streams (src/api/relay.ts).

import { realClock, type Clock } from "../contract/index.ts";
import type { ChatMessage } from "./messages.ts";
import type { ChatChange } from "./transitions/change.ts";

/** How long a commit's messages are held for the streams that follow its chat. */
export const FEED_MS = 5_000;
/** How many commits of one chat are held at most (the newest). */
export const FEED_ENTRIES_PER_CHAT = 4;

/** What one committed transition did to a chat's history. */
export interface HistoryMove {
  /** The chat's history version before the commit (its row's, under the lock). */
  before: string;
  /** The history version the commit left. */
  after: string;
  /** Every message it inserted, in ID order (whatever their visibility: readers filter). */
  messages: readonly ChatMessage[];
}

export interface FeedEntry {
  before: bigint;
  after: bigint;
  messages: readonly ChatMessage[];
  at: number;
}

interface Followed {
  watchers: number;
  entries: FeedEntry[];
}

interface InFlight {
  count: number;
  settled: Promise<void>;
  resolve: () => void;
}

/** Hears a change this replica committed without a notification. */
export type OwnChangeListener = (change: ChatChange) => void;

export class MessageFeed {
  readonly #chats = new Map<string, Followed>();
  readonly #inFlight = new Map<string, InFlight>();
  readonly #changeListeners = new Map<string, Set<OwnChangeListener>>();

  constructor(
    private readonly clock: Clock = realClock,
    private readonly maxAgeMs = FEED_MS,
    private readonly perChat = FEED_ENTRIES_PER_CHAT,
  ) {}

  /** A stream follows the chat: its commits from now on are held. Answers the unfollow. */
  watch(chatId: string): () => void {
    let f = this.#chats.get(chatId);
    if (!f) this.#chats.set(chatId, (f = { watchers: 0, entries: [] }));
    f.watchers += 1;
    const followed = f;
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      followed.watchers -= 1;
      if (followed.watchers === 0 && this.#chats.get(chatId) === followed)
        this.#chats.delete(chatId);
    };
  }

  /**
   * The changes this replica commits to the chat without a notification (a runner's fenced
   * writes), from now on. Answers the unsubscribe.
   */
  changes(chatId: string, listener: OwnChangeListener): () => void {
    let set = this.#changeListeners.get(chatId);
    if (!set) this.#changeListeners.set(chatId, (set = new Set()));
    set.add(listener);
    const listeners = set;
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.#changeListeners.get(chatId) === listeners)
        this.#changeListeners.delete(chatId);
    };
  }

  /**
   * A commit of the chat is under way on this replica: answers its end, to be called once — when
   * it committed, with what it moved (if it moved history) and its change (if it sent no
   * notification: the change is told to `changes` listeners last); without
   * either when it did not commit.
   */
  committing(chatId: string): (moved?: HistoryMove, change?: ChatChange) => void {
    let p = this.#inFlight.get(chatId);
    if (!p) {
      let resolve!: () => void;
      const settled = new Promise<void>((r) => (resolve = r));
      this.#inFlight.set(chatId, (p = { count: 0, settled, resolve }));
    }
    p.count += 1;
    const inFlight = p;
    let ended = false;
    return (moved, change) => {
      if (ended) return;
      ended = true;
      if (moved) this.publish(chatId, moved);
      inFlight.count -= 1;
      if (inFlight.count === 0) {
        if (this.#inFlight.get(chatId) === inFlight) this.#inFlight.delete(chatId);
        inFlight.resolve();
      }
      if (change) for (const l of [...(this.#changeListeners.get(chatId) ?? [])]) l(change);
    };
  }

  /** Resolves once no commit of the chat announced by `committing` is under way. */
  settled(chatId: string): Promise<void> | undefined {
    return this.#inFlight.get(chatId)?.settled;
  }

  /** A committed move of the chat's history (kept only while a stream here follows the chat). */
  publish(chatId: string, moved: HistoryMove): void {
    const f = this.#chats.get(chatId);
    if (!f || moved.messages.length === 0) return;
    const before = BigInt(moved.before);
    const after = BigInt(moved.after);
    if (after <= before) return;
    this.#prune(f);
    f.entries.push({ before, after, messages: moved.messages, at: this.clock.now() });
    if (f.entries.length > this.perChat) f.entries.splice(0, f.entries.length - this.perChat);
  }

  /** The held commit that moved the chat's history from `before`, if any. */
  from(chatId: string, before: bigint): FeedEntry | undefined {
    const f = this.#chats.get(chatId);
    if (!f) return undefined;
    this.#prune(f);
    return f.entries.find((e) => e.before === before);
  }

  /** How many commits are held, over every chat (tests: memory stays bounded). */
  get size(): number {
    let n = 0;
    for (const f of this.#chats.values()) n += f.entries.length;
    return n;
  }

  #prune(f: Followed): void {
    const oldest = this.clock.now() - this.maxAgeMs;
    const keep = f.entries.findIndex((e) => e.at >= oldest);
    if (keep !== 0) f.entries.splice(0, keep < 0 ? f.entries.length : keep);
  }
}
