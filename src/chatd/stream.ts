// The per-replica stream buffer (CHATD.md 5): live parts of the generation in progress,
// keyed by (chat, history_version, generation_attempt), fanned out to watchers. Parts are
// best-effort and kept only for the current episode; committed messages are the truth.

/** A live delta: a text or reasoning chunk, or a complete tool call. */
export type LivePart =
  | { type: "text-delta"; text: string }
  | { type: "reasoning-delta"; text: string }
  | { type: "tool-call"; tool_call_id: string; tool_name: string; args: unknown }
  | { type: "tool-started"; tool_call_id: string; tool_name: string }
  | { type: "tool-finished"; tool_call_id: string; tool_name: string; status: string };

export interface PartEvent {
  history_version: string;
  generation_attempt: number;
  seq: number;
  part: LivePart;
}

export type StreamListener = (e: PartEvent) => void;

interface Episode {
  historyVersion: string;
  attempt: number;
  parts: PartEvent[];
  /** Model invocation start (clock ms), for interrupt billing. */
  modelStartedAt?: number;
}

export class StreamBuffer {
  readonly #episodes = new Map<string, Episode>();
  readonly #listeners = new Map<string, Set<StreamListener>>();

  /** Starts a new episode for the chat, dropping the previous one's parts. */
  begin(chatId: string, historyVersion: string, attempt: number): void {
    this.#episodes.set(chatId, { historyVersion, attempt, parts: [] });
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
