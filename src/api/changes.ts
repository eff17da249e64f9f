// One LISTEN on the chat channel for the whole API, fanned out to the event streams by chat ID,
// so a thousand open streams cost one database connection's subscription, not a thousand.

import type { Database } from "../chatd/db/index.ts";
import { CHAT_CHANNEL, type ChatChange } from "../chatd/transitions/index.ts";

type ChangeListener = (change: ChatChange) => void;

/** One LISTEN on CHAT_CHANNEL for the whole API, fanned out to the streams by chat ID. */
export class ChatChanges {
  readonly #db: Database;
  readonly #listeners = new Map<string, Set<ChangeListener>>();
  #listening: Promise<() => Promise<void>> | undefined;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Resolves once notifications for `chatId` reach `listener`; answers the unsubscribe. */
  async subscribe(chatId: string, listener: ChangeListener): Promise<() => void> {
    let set = this.#listeners.get(chatId);
    if (!set) this.#listeners.set(chatId, (set = new Set()));
    set.add(listener);
    const unsubscribe = (): void => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(chatId) === set) this.#listeners.delete(chatId);
    };
    try {
      await this.#listen();
    } catch (err) {
      unsubscribe();
      throw err;
    }
    return unsubscribe;
  }

  #listen(): Promise<() => Promise<void>> {
    if (!this.#listening) {
      const listening = this.#db.listen(CHAT_CHANNEL, (payload) => this.#dispatch(payload));
      this.#listening = listening;
      // A failed LISTEN is tried again by the next subscriber.
      listening.catch(() => {
        if (this.#listening === listening) this.#listening = undefined;
      });
    }
    return this.#listening;
  }

  #dispatch(payload: string): void {
    let change: ChatChange;
    try {
      change = JSON.parse(payload) as ChatChange;
    } catch {
      return;
    }
    for (const l of this.#listeners.get(change.chat_id) ?? []) l(change);
  }

  async close(): Promise<void> {
    const listening = this.#listening;
    this.#listening = undefined;
    if (listening) await (await listening.catch(() => async () => {}))();
  }
}
