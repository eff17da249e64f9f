// A model step sent ahead (docs/architecture.md "The step sent ahead"). A batch's results are
// committed before the model reads them, and the request that reads them is known before that
// commit ends: it goes out while the results commit, so the commit's round trip overlaps the
// model's instead of coming before it. The next task takes the step only if it sends the same
// request (the same model object, system prompt and messages) from the history the commit left;
// any other task drops it, and a dropped step is aborted at once. A model call does nothing
// outside the answer it streams, and that answer is committed, as any step's, by a task whose
// fence holds: sending the request early changes what a chat records in nothing but time.

import type { ModelMessage } from "ai";
import { streamStep, type LanguageModel, type StepPart } from "../model/index.ts";
import type { ContextSnapshot } from "./prompt/index.ts";
import { systemPrompt, toModelMessages } from "./prompt/index.ts";
import type { ChatMessage } from "./messages.ts";
import { toolDeclarations } from "./tools/index.ts";

/** What a model step sends besides its tools: the system prompt and the conversation. */
export interface ModelRequest {
  system: string;
  messages: ModelMessage[];
}

/** The request of a model step reading `history` with the context `snapshot`. */
export function modelRequest(snapshot: ContextSnapshot, history: ChatMessage[]): ModelRequest {
  return { system: systemPrompt(snapshot), messages: toModelMessages(history) };
}

/** A model step's parts, its request sent now (streamStep with chatd's tools). */
export function sendStep(
  model: LanguageModel,
  request: ModelRequest,
  signal: AbortSignal,
): AsyncGenerator<StepPart, void, undefined> {
  return streamStep(model, { ...request, tools: toolDeclarations(), abortSignal: signal });
}

export class StepAhead {
  readonly #ac = new AbortController();
  readonly #model: LanguageModel;
  readonly #key: string;
  readonly #parts: AsyncGenerator<StepPart, void, undefined>;
  /** The first part, asked for at once: that sends the request. */
  readonly #first: Promise<IteratorResult<StepPart, void>>;
  #settled = false;

  /** Sends `request` to `model` now; `sentAt` is when (the step's model window starts there). */
  constructor(
    model: LanguageModel,
    request: ModelRequest,
    readonly sentAt: number,
  ) {
    this.#model = model;
    this.#key = JSON.stringify(request);
    this.#parts = sendStep(model, request, this.#ac.signal);
    this.#first = this.#parts.next();
    // Read by whoever takes the step; a dropped one's failure (its abort) is nobody's.
    this.#first.catch(() => undefined);
  }

  /**
   * The step's parts for a task about to send `request` to `model`, aborted with `signal`; or
   * undefined when that request is another, and the step is dropped. Once: a step is taken or
   * dropped by the first task that asks.
   */
  take(
    model: LanguageModel,
    request: ModelRequest,
    signal: AbortSignal,
  ): AsyncGenerator<StepPart, void, undefined> | undefined {
    if (this.#settled || model !== this.#model || JSON.stringify(request) !== this.#key) {
      this.drop();
      return undefined;
    }
    this.#settled = true;
    if (signal.aborted) this.#ac.abort(signal.reason);
    else signal.addEventListener("abort", () => this.#ac.abort(signal.reason), { once: true });
    return continued(this.#first, this.#parts);
  }

  /** Nobody takes it: the request is aborted and its answer, if any came, read no further. */
  drop(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#ac.abort();
    // The provider's response, if it began, is closed (the generator's own cleanup).
    void this.#first.then(() => this.#parts.return(undefined)).catch(() => undefined);
  }
}

/** The parts of a generator whose first `next()` was already asked for. */
async function* continued(
  first: Promise<IteratorResult<StepPart, void>>,
  rest: AsyncGenerator<StepPart, void, undefined>,
): AsyncGenerator<StepPart, void, undefined> {
  try {
    const f = await first;
    if (f.done) return;
    yield f.value;
    yield* rest;
  } finally {
    // Left after the first part: the rest closes the provider's response (a no-op once done).
    await rest.return(undefined);
  }
}
