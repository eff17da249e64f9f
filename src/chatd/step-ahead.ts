// A model step sent ahead (docs/architecture.md "A step sent ahead"). Two waits come before a
// model step whose request is already known: a batch's results are committed before the model
// reads them, and a new chat's first step waits for the workspace agent's context. In both, the
// request goes out first — with the results it will read, or with the context snapshot this
// workspace gave the same model last — and the task that makes the step takes it only if its
// own request is the same (the same model object, system prompt and messages); otherwise it is
// dropped, and a dropped step's request is aborted at once. A model call does nothing outside
// the answer it streams, and that answer is committed, as any step's, by a task whose fence
// holds: sending the request early changes what a chat records in nothing but time.

import type { ModelMessage } from "ai";
import type { Clock, Timer } from "../contract/index.ts";
import { streamStep, type LanguageModel, type StepPart } from "../model/index.ts";
import type { ChatMessage, NewMessage } from "./messages.ts";
import {
  compactionDue,
  systemPrompt,
  toModelMessages,
  type ContextBudget,
  type ContextSnapshot,
} from "./prompt/index.ts";
import { toolDeclarations } from "./tools/index.ts";
import { committedMessage, messageRecord } from "./transitions/index.ts";

/** A step nobody took this long after its request went out is dropped. */
export const STEP_AHEAD_MAX_AGE_MS = 2_000;
/** How many workspaces' latest snapshots a replica keeps (RecentSnapshots). */
export const RECENT_SNAPSHOTS_MAX = 256;
/** How long a workspace's latest snapshot is used for sending a new chat's step ahead. */
export const RECENT_SNAPSHOT_MS = 60_000;

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

/**
 * The model step of `model` that reads `history` (committed, or about to be: `pending`), sent
 * now with `snapshot`, unless a compaction is due first within `budget` (generationTask's order).
 */
export function sendAhead(
  model: LanguageModel,
  budget: ContextBudget,
  snapshot: ContextSnapshot,
  history: ChatMessage[],
  pending: NewMessage[],
  o: { compactRequested: boolean; clock: Clock },
): StepAhead | undefined {
  // As the commit will hold them; their IDs and times are not part of a prompt.
  const next = [
    ...history,
    ...pending.map((m) => committedMessage(messageRecord(m), "", "0", new Date(0))),
  ];
  const requested = o.compactRequested ? "requested" : undefined;
  if (compactionDue(next, requested, budget)) return undefined;
  return new StepAhead(model, modelRequest(snapshot, next), o.clock);
}

export class StepAhead {
  readonly #ac = new AbortController();
  readonly #model: LanguageModel;
  readonly #request: ModelRequest;
  readonly #parts: AsyncGenerator<StepPart, void, undefined>;
  /** The first part, asked for at once: that sends the request. */
  readonly #first: Promise<IteratorResult<StepPart, void>>;
  readonly #expiry: Timer;
  #settled = false;

  /**
   * Sends `request` to `model` once what its caller started in this turn of the event loop is
   * on its way (afterWrites); dropped if nobody takes it within `maxAgeMs`.
   */
  constructor(
    model: LanguageModel,
    request: ModelRequest,
    clock: Clock,
    maxAgeMs = STEP_AHEAD_MAX_AGE_MS,
  ) {
    this.#model = model;
    this.#request = request;
    const signal = this.#ac.signal;
    this.#parts = afterWrites(() => sendStep(model, request, signal), signal);
    this.#first = this.#parts.next();
    // Read by whoever takes the step; a dropped one's failure (its abort) is nobody's.
    this.#first.catch(() => undefined);
    this.#expiry = clock.setTimer(maxAgeMs, () => this.drop());
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
    if (this.#settled || model !== this.#model || !sameRequest(request, this.#request)) {
      this.drop();
      return undefined;
    }
    this.#settled = true;
    this.#expiry.cancel();
    if (signal.aborted) this.#ac.abort(signal.reason);
    else signal.addEventListener("abort", () => this.#ac.abort(signal.reason), { once: true });
    return continued(this.#first, this.#parts);
  }

  /** Nobody takes it: the request is aborted and its answer, if any came, read no further. */
  drop(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#expiry.cancel();
    this.#ac.abort();
    // The provider's response, if it began, is closed (the generator's own cleanup).
    void this.#first.then(() => this.#parts.return(undefined)).catch(() => undefined);
  }
}

/** Whether two model requests send the provider the same system prompt and messages. */
function sameRequest(a: ModelRequest, b: ModelRequest): boolean {
  return a.system === b.system && sameJson(a.messages, b.messages);
}

/**
 * Whether `a` and `b` serialize to the same JSON (up to the order of object keys), without
 * serializing them: two serializations of a long chat's whole context per step cost 7–9 ms for a
 * megabyte of it, this walk a thirtieth of that. Never true for values whose JSON differs; it
 * may be false for some whose JSON is the same (NaN beside null, say), which only drops a step.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  const aJson = (a as { toJSON?: unknown }).toJSON;
  const bJson = (b as { toJSON?: unknown }).toJSON;
  if (typeof aJson === "function" || typeof bJson === "function") {
    if (typeof aJson !== "function" || typeof bJson !== "function") return false;
    return sameJson(aJson.call(a) as unknown, bJson.call(b) as unknown);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  let seen = 0;
  for (const k of Object.keys(ao)) {
    if (!inJson(ao[k])) continue;
    if (!Object.hasOwn(bo, k) || !inJson(bo[k]) || !sameJson(ao[k], bo[k])) return false;
    seen++;
  }
  let visible = 0;
  for (const k of Object.keys(bo)) if (inJson(bo[k])) visible++;
  return seen === visible;
}

/** Whether JSON.stringify writes a property holding `v` (it leaves these out). */
function inJson(v: unknown): boolean {
  return v !== undefined && typeof v !== "function" && typeof v !== "symbol";
}

/**
 * The parts of `send()`, called at the event loop's next check phase: a step ahead runs beside a
 * statement its caller issues in the same turn (a batch's results, a new chat's create) and is
 * waited for after it, so that statement's bytes go out first — the database driver writes on
 * the next tick, and building a provider's request takes a millisecond of this thread's time in
 * promise callbacks that would all run before it. Nothing is sent once `signal` aborted.
 */
async function* afterWrites(
  send: () => AsyncGenerator<StepPart, void, undefined>,
  signal: AbortSignal,
): AsyncGenerator<StepPart, void, undefined> {
  await new Promise((resolve) => setImmediate(resolve));
  signal.throwIfAborted();
  yield* send();
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

/**
 * The context snapshot each workspace gave last on this replica, with the model it was sent to
 * and when, for sending a new chat's first step ahead: with that model only (a provider is sent
 * nothing it was not sent before), and only within RECENT_SNAPSHOT_MS (a workspace whose agent
 * answered a minute ago most likely runs still; one stopped since would only waste the step).
 * At most RECENT_SNAPSHOTS_MAX workspaces, the least recent forgotten.
 */
export class RecentSnapshots {
  readonly #byWorkspace = new Map<
    string,
    { model: LanguageModel; snapshot: ContextSnapshot; at: number }
  >();

  constructor(
    private readonly clock: Clock,
    private readonly o: { max?: number; maxAgeMs?: number } = {},
  ) {}

  remember(model: LanguageModel, workspaceId: string, snapshot: ContextSnapshot): void {
    this.#byWorkspace.delete(workspaceId);
    this.#byWorkspace.set(workspaceId, { model, snapshot, at: this.clock.now() });
    if (this.#byWorkspace.size > (this.o.max ?? RECENT_SNAPSHOTS_MAX))
      this.#byWorkspace.delete(this.#byWorkspace.keys().next().value!);
  }

  /** The snapshot `workspaceId` gave last, if it was sent to `model` recently. */
  recall(model: LanguageModel, workspaceId: string): ContextSnapshot | undefined {
    const r = this.#byWorkspace.get(workspaceId);
    if (!r || r.model !== model) return undefined;
    if (this.clock.now() - r.at > (this.o.maxAgeMs ?? RECENT_SNAPSHOT_MS)) return undefined;
    return r.snapshot;
  }
}
