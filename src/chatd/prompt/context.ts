// A chat's context snapshot: the workspace's environment and instruction files (the agent's
// `GET /api/v0/context`) and the organisation's instructions, taken before the chat's first
// model step and kept for the chat's life, so its prompt does not change under it; a refresh
// replaces it whole. What users see of it is its files' paths and sizes, never their text.

import {
  AgentHttpError,
  type AgentClient,
  type ContextFile,
  type ContextResponse,
} from "../../contract/index.ts";
import type { Database, Queryable } from "../db/index.ts";

/** How long a capture waits for the agent's answer at most (also never above the answer timeout). */
export const CONTEXT_CAPTURE_TIMEOUT_MS = 10_000;

/** A worker's bound on a capture: CONTEXT_CAPTURE_TIMEOUT_MS, never above its answer timeout. */
export function captureTimeoutMs(agentAnswerTimeoutMs: number): number {
  return Math.min(CONTEXT_CAPTURE_TIMEOUT_MS, agentAnswerTimeoutMs);
}
/** The organisation's instructions are cut to this many bytes (the API refuses more). */
export const ORGANIZATION_INSTRUCTIONS_MAX_BYTES = 32 * 1024;
/** The key of the organisation's instructions in `settings`. */
export const INSTRUCTIONS_KEY = "instructions";

export interface ContextSnapshot {
  /** The environment block's facts; null when the agent does not report them. */
  environment: Omit<ContextResponse, "files" | "limits"> | null;
  files: ContextFile[];
  /** The organisation-wide instructions at capture time (null: none set). */
  organization: string | null;
  /** Why the environment is missing, for the prompt. */
  note?: string;
}

/** `GET /api/v1/chats/{id}`'s `context`. */
export interface ContextView {
  files: { path: string; bytes: number; truncated: boolean }[];
  captured_at: string;
  directory: string | null;
  organization_bytes: number;
}

/** A chat's kept snapshot and when it was taken. */
export interface KeptSnapshot {
  snapshot: ContextSnapshot;
  capturedAt: Date;
}

/** The chat's kept snapshot, or undefined before the first capture. */
export async function loadSnapshot(
  q: Queryable,
  chatId: string,
): Promise<KeptSnapshot | undefined> {
  const r = await q.query<{ snapshot: ContextSnapshot; captured_at: Date }>(
    "SELECT snapshot, captured_at FROM chat_contexts WHERE chat_id = $1",
    [chatId],
  );
  const row = r.rows[0];
  return row ? { snapshot: row.snapshot, capturedAt: row.captured_at } : undefined;
}

export function contextView(kept: KeptSnapshot): ContextView {
  return {
    files: kept.snapshot.files.map((f) => ({
      path: f.path,
      bytes: f.bytes,
      truncated: f.truncated,
    })),
    captured_at: kept.capturedAt.toISOString(),
    directory: kept.snapshot.environment?.directory ?? null,
    organization_bytes: Buffer.byteLength(kept.snapshot.organization ?? ""),
  };
}

/** The instructions in a settings value, or null when there are none. */
export function instructionsOf(value: { text?: unknown } | null | undefined): string | null {
  const text = value?.text;
  return typeof text === "string" && text.trim() !== "" ? text : null;
}

export async function organizationInstructions(q: Queryable): Promise<string | null> {
  const r = await q.query<{ value: { text?: unknown } }>(
    "SELECT value FROM settings WHERE key = $1",
    [INSTRUCTIONS_KEY],
  );
  return instructionsOf(r.rows[0]?.value);
}

export async function setOrganizationInstructions(
  q: Queryable,
  text: string,
  userId: string,
): Promise<void> {
  await q.query(
    `INSERT INTO settings (key, value, updated_by, updated_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by,
       updated_at = now()`,
    [INSTRUCTIONS_KEY, JSON.stringify({ text }), userId],
  );
}

/**
 * Takes a snapshot now. An agent without the context route (404) gives a snapshot without an
 * environment; an agent that cannot be reached throws (nothing is kept, the next step tries
 * again).
 */
export async function captureSnapshot(
  db: Queryable,
  client: AgentClient | undefined,
  signal: AbortSignal,
  timeoutMs: number = CONTEXT_CAPTURE_TIMEOUT_MS,
): Promise<ContextSnapshot> {
  return takeSnapshot(await organizationInstructions(db), client, signal, timeoutMs);
}

/** captureSnapshot with the organisation's instructions already read. */
export async function takeSnapshot(
  organization: string | null,
  client: AgentClient | undefined,
  signal: AbortSignal,
  timeoutMs: number = CONTEXT_CAPTURE_TIMEOUT_MS,
): Promise<ContextSnapshot> {
  return { ...(await agentContext(client, signal, timeoutMs)), organization };
}

/** The agent's part of a snapshot: all of it but the organisation's instructions. */
export type AgentContext = Omit<ContextSnapshot, "organization">;

/** Asks the agent for its part of a snapshot (takeSnapshot). */
async function agentContext(
  client: AgentClient | undefined,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<AgentContext> {
  if (!client) return { environment: null, files: [] };
  let answer: ContextResponse;
  try {
    answer = await client.context({ signal, timeoutMs });
  } catch (err) {
    if (err instanceof AgentHttpError && err.status === 404) {
      return {
        environment: null,
        files: [],
        note:
          "The workspace agent does not report its environment: use absolute paths, and run " +
          "`pwd`, `uname -a` and `git status` to learn about the workspace.",
      };
    }
    throw err;
  }
  const { files, limits: _limits, ...environment } = answer;
  return { environment, files };
}

/**
 * The agent's part of a new chat's first snapshot, asked for while the statement that creates
 * the chat runs rather than after it (worker.ts), so the first model step need not wait for
 * both one after the other. Taken by that step only if the chat's claim still holds and the
 * owner may use the workspace (compaction-step.ts chatSnapshot); dropped otherwise.
 */
export class ContextPrefetch {
  readonly #ac = new AbortController();
  /** Undefined: not asked (no workspace the owner may use, as far as this replica knows) or failed. */
  readonly #answer: Promise<AgentContext | undefined>;

  constructor(client: Promise<AgentClient | undefined>, timeoutMs: number) {
    this.#answer = client
      .then((c) => (c ? agentContext(c, this.#ac.signal, timeoutMs) : undefined))
      .catch(() => undefined);
  }

  /**
   * The agent's answer, waited for while `signal` holds; undefined when it was not asked or
   * asking failed (the step then asks itself, and its failure is the one reported).
   */
  async take(signal: AbortSignal): Promise<AgentContext | undefined> {
    signal.throwIfAborted();
    const stop = (): void => this.#ac.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    try {
      const answer = await this.#answer;
      signal.throwIfAborted();
      return answer;
    } finally {
      signal.removeEventListener("abort", stop);
    }
  }

  /** Nobody will take it: stop asking. */
  drop(): void {
    this.#ac.abort();
  }
}

/** Replaces the chat's snapshot (a refresh). */
export async function replaceSnapshot(
  db: Database,
  chatId: string,
  snapshot: ContextSnapshot,
): Promise<{ snapshot: ContextSnapshot; capturedAt: Date }> {
  await db.query(
    `INSERT INTO chat_contexts (chat_id, snapshot, captured_at) VALUES ($1, $2, now())
     ON CONFLICT (chat_id) DO UPDATE SET snapshot = EXCLUDED.snapshot, captured_at = now()`,
    [chatId, JSON.stringify(snapshot)],
  );
  return (await loadSnapshot(db, chatId))!;
}
