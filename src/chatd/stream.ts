// The per-replica stream buffer (CHATD.md 5): live parts of the generation in progress,
// keyed by (chat, history_version, generation_attempt), fanned out to watchers. Parts are
// best-effort and kept only for the current episode; committed messages are the truth.

/** A live delta: a text or reasoning chunk, or a complete tool call. */
export type LivePart =
  | { type: "text-delta"; text: string }
  | { type: "reasoning-delta"; text: string }
  | { type: "tool-call"; tool_call_id: string; tool_name: string; args: unknown }
  | {
      type: "tool-started";
      tool_call_id: string;
      tool_name: string;
      /** An execute's process ID (its tool call UUID), so a watcher can read its output live. */
      process_id?: string;
    }
  | { type: "tool-finished"; tool_call_id: string; tool_name: string; status: string };

export interface PartEvent {
  history_version: string;
  generation_attempt: number;
  seq: number;
  part: LivePart;
}

export type StreamListener = (e: PartEvent) => void;

/** A live model episode as the interrupt reads it (CHATD.md 8 step 1). */
export interface EpisodeView {
  historyVersion: string;
  attempt: number;
  parts: PartEvent[];
  modelStartedAt?: number;
  /** A compaction's episode: no live parts, its model time billed on a usage record. */
  compaction?: true;
}

/** One call of the batch in progress on this replica: its execution stamps (clock ms). */
export interface CallStamps {
  startedAt: number;
  /** Set once the call's outcome is known; `billable` says whether it ran. */
  endedAt?: number;
  billable?: boolean;
}

interface Episode {
  historyVersion: string;
  attempt: number;
  parts: PartEvent[];
  /** Model invocation start (clock ms), for interrupt billing. */
  modelStartedAt?: number;
  compaction?: true;
}

export class StreamBuffer {
  readonly #episodes = new Map<string, Episode>();
  readonly #listeners = new Map<string, Set<StreamListener>>();
  readonly #batches = new Map<string, { historyVersion: string; calls: Map<string, CallStamps> }>();

  /** Starts a new episode for the chat, dropping the previous one's parts. */
  begin(chatId: string, historyVersion: string, attempt: number): void {
    this.#episodes.set(chatId, { historyVersion, attempt, parts: [] });
  }

  /**
   * Starts a compaction's episode: watchers get no parts (its summary is no message until it
   * is committed), but an interrupt reads its model start to bill it (CHATD.md 9).
   */
  beginCompaction(chatId: string, historyVersion: string, attempt: number): void {
    this.#episodes.set(chatId, { historyVersion, attempt, parts: [], compaction: true });
  }

  append(chatId: string, part: LivePart): void {
    const ep = this.#episodes.get(chatId);
    if (!ep) return;
    const e: PartEvent = {
      history_version: ep.historyVersion,
      generation_attempt: ep.attempt,
      seq: ep.parts.length,
      part,
    };
    ep.parts.push(e);
    for (const l of this.#listeners.get(chatId) ?? []) l(e);
  }

  /** Ends the chat's episode (its parts are committed or abandoned). */
  end(chatId: string): void {
    this.#episodes.delete(chatId);
  }

  /** Stamps the model invocation start of the chat's episode (for interrupt billing). */
  modelStarted(chatId: string, at: number): void {
    const ep = this.#episodes.get(chatId);
    if (ep) ep.modelStartedAt = at;
  }

  /** The chat's current episode, if any. */
  episode(chatId: string): EpisodeView | undefined {
    const ep = this.#episodes.get(chatId);
    if (!ep) return undefined;
    const view: EpisodeView = {
      historyVersion: ep.historyVersion,
      attempt: ep.attempt,
      parts: [...ep.parts],
    };
    if (ep.modelStartedAt !== undefined) view.modelStartedAt = ep.modelStartedAt;
    if (ep.compaction) view.compaction = true;
    return view;
  }

  /**
   * Starts recording the stamps of a tool batch at `historyVersion` (replacing any other). A
   * batch already recorded at that version (a task retry on this replica) keeps its stamps: its
   * calls ran since their first start here (CHATD.md 9).
   */
  beginBatch(chatId: string, historyVersion: string): void {
    if (this.#batches.get(chatId)?.historyVersion === historyVersion) return;
    this.#batches.set(chatId, { historyVersion, calls: new Map() });
  }

  /**
   * Records a call's start, or its end when `endedAt` is given, and answers what is recorded.
   * A call's interval on this replica is its first start to its first end: a retried task that
   * sends the call again (the agent replays it) neither restarts nor extends it.
   */
  stampCall(
    chatId: string,
    toolCallId: string,
    stamp: { startedAt: number; endedAt?: number; billable?: boolean },
  ): CallStamps {
    const calls = this.#batches.get(chatId)?.calls;
    const prev = calls?.get(toolCallId);
    let next: CallStamps;
    if (!prev) next = { ...stamp };
    else if (prev.endedAt !== undefined || stamp.endedAt === undefined) next = prev;
    else next = { ...stamp, startedAt: prev.startedAt };
    calls?.set(toolCallId, next);
    return { ...next };
  }

  /** The batch's stamps so far, if this replica records the batch at `historyVersion`. */
  batch(chatId: string, historyVersion: string): Map<string, CallStamps> | undefined {
    const b = this.#batches.get(chatId);
    if (!b || b.historyVersion !== historyVersion) return undefined;
    return new Map([...b.calls].map(([id, s]) => [id, { ...s }]));
  }

  /** Forgets the chat's batch stamps (the batch is committed). */
  endBatch(chatId: string): void {
    this.#batches.delete(chatId);
  }

  /** The current episode's parts so far. */
  parts(chatId: string): PartEvent[] {
    return [...(this.#episodes.get(chatId)?.parts ?? [])];
  }

  subscribe(chatId: string, listener: StreamListener): () => void {
    let set = this.#listeners.get(chatId);
    if (!set) this.#listeners.set(chatId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(chatId);
    };
  }
}
