// The two prompt actions of the generation task beside its model step: the chat's context
// snapshot for the step (kept with the first step that uses it), and compacting the
// conversation into a boundary message (docs/prompt.md).

import { streamStep } from "../model/index.ts";
import { costMicros } from "./billing.ts";
import type { Chat, Fence } from "./chats.ts";
import type { Queryable } from "./db/index.ts";
import type { GenerationDeps, ResolvedModel } from "./generation.ts";
import { turnComplete, type ChatMessage, type CompactionPart } from "./messages.ts";
import {
  captureTimeoutMs,
  instructionsOf,
  INSTRUCTIONS_KEY,
  takeSnapshot,
  compactionRequest,
  type ContextPrefetch,
  sinceBoundary,
  type ContextBudget,
  type ContextSnapshot,
  type KeptSnapshot,
} from "./prompt/index.ts";
import { attemptStopped } from "./worker/retry.ts";
import { commitCompaction, recordGenerationAttempt } from "./transitions/index.ts";
import {
  accessRowSql,
  accessOf,
  lostWorkspaceWords,
  type AccessRow,
  type WorkspaceAccess,
} from "./workspace-access.ts";

/** The context snapshot a model step's prompt is made from; `keep`: kept with the step. */
export interface StepSnapshot {
  snapshot: ContextSnapshot;
  keep: boolean;
}

/**
 * The chat's context snapshot for its next model step: the kept one; else one is taken now and
 * kept with that step, in its commit (held until then, so a retried step does not ask the
 * agent again). An agent that cannot be reached leaves nothing kept: this step's prompt says
 * so, and the next step tries again. A workspace the chat's owner may no longer use
 * (workspace-access.ts) is not read at all, and nothing is kept either (what a new chat's
 * prefetch asked before its claim read the access is dropped unread).
 */
export async function chatSnapshot(
  deps: GenerationDeps,
  chat: Chat,
  signal: AbortSignal,
): Promise<StepSnapshot> {
  const held = deps.held?.snapshot;
  if (held) return { snapshot: held.snapshot, keep: false };
  const unkept = deps.held?.unkept;
  if (unkept) return { snapshot: unkept, keep: true };
  // What the claim read, while its row is held; else one read.
  const claimed = held === null ? deps.held?.snapshotInputs() : undefined;
  const { kept, access, organization, prefetch }: SnapshotInputs =
    claimed ?? (await snapshotInputs(deps.db, chat));
  if (kept) {
    if (deps.held?.chat) deps.held.snapshot = kept;
    return { snapshot: kept.snapshot, keep: false };
  }
  // Nothing kept: a later step takes the snapshot if the workspace is the owner's to use again.
  if (access.status === "lost") {
    prefetch?.drop();
    const none = await takeSnapshot(organization, undefined, signal);
    return {
      snapshot: { ...none, note: `${lostWorkspaceWords(access.why).note} Tools will not run.` },
      keep: false,
    };
  }
  const client = await deps.resolveAgent(chat);
  let taken: ContextSnapshot;
  try {
    // The agent's answer to a new chat's prefetch if it came (the same agent: the same
    // workspace), else asked now.
    const ahead = client && (await prefetch?.take(signal));
    taken = ahead
      ? { ...ahead, organization }
      : await takeSnapshot(
          organization,
          client,
          signal,
          captureTimeoutMs(deps.agentAnswerTimeoutMs),
        );
  } catch (err) {
    signal.throwIfAborted();
    deps.log.warn(
      { chat_id: chat.id, error: err instanceof Error ? err.message : String(err) },
      "context snapshot failed; trying again at the next step",
    );
    return {
      snapshot: {
        environment: null,
        files: [],
        organization,
        note:
          "The workspace agent could not be reached to learn its environment: use absolute " +
          "paths, and expect tool calls to report the agent unreachable.",
      },
      keep: false,
    };
  }
  if (deps.held) deps.held.unkept = taken;
  return { snapshot: taken, keep: true };
}

/** What taking a snapshot needs: the kept one (if any), the owner's access, the instructions. */
interface SnapshotInputs {
  kept?: KeptSnapshot;
  access: WorkspaceAccess;
  organization: string | null;
  /** The agent's part, asked for alongside the claim of a new chat (HeldChat.snapshotInputs). */
  prefetch?: ContextPrefetch;
}

/**
 * What taking a snapshot needs, in one statement: the kept one (if any), the owner's access to
 * the workspace (workspace-access.ts), and the organisation's instructions.
 */
async function snapshotInputs(q: Queryable, chat: Chat): Promise<SnapshotInputs> {
  const r = await q.query<
    AccessRow & {
      snapshot: ContextSnapshot | null;
      captured_at: Date | null;
      organization: { text?: unknown } | null;
      has_owner: boolean;
    }
  >(
    // The access row as workspaceAccess reads it (owner $1, workspace $2): none without owner.
    `SELECT k.snapshot, k.captured_at, s.value AS organization, a.disabled IS NOT NULL AS has_owner,
       a.disabled, a.shared, a.owner_id
     FROM (SELECT 1) one
     LEFT JOIN (${accessRowSql("$1", "$2")}) a ON true
     LEFT JOIN chat_contexts k ON k.chat_id = $3
     LEFT JOIN settings s ON s.key = $4`,
    [chat.ownerId, chat.workspaceId, chat.id, INSTRUCTIONS_KEY],
  );
  const row = r.rows[0]!;
  return {
    ...(row.snapshot &&
      row.captured_at && {
        kept: { snapshot: row.snapshot, capturedAt: row.captured_at },
      }),
    access: accessOf(chat, row.has_owner ? row : undefined),
    organization: instructionsOf(row.organization),
  };
}

/**
 * The compaction action: one model call with no tools writes the summary of the conversation
 * since the boundary, committed as the new boundary (fenced like a model step, so a retried or
 * interrupted one commits at most one). Its model time and tokens are billed on the boundary;
 * an interrupted one's model time so far on a usage record of the interrupt (interrupt.ts).
 */
export async function compact(
  deps: GenerationDeps,
  fence: Fence,
  history: ChatMessage[],
  resolved: ResolvedModel,
  budget: ContextBudget,
  reason: CompactionPart["reason"],
  signal: AbortSignal,
): Promise<void> {
  const attempt = await recordGenerationAttempt(deps.db, fence, deps.held);
  const attemptFence: Fence = { ...fence, generationAttempt: attempt };
  const request = compactionRequest(history, budget.limitTokens);
  const lastStep = sinceBoundary(history)
    .filter((m) => m.role === "assistant" && m.promptTokens !== null)
    .at(-1);
  // Its own episode in the stream buffer, with no live parts (the summary is no message until
  // it is committed): an interrupt bills its model window from here (CHATD.md 9).
  deps.buffer.beginCompaction(fence.chatId, fence.historyVersion, attempt);
  const opened = deps.clock.now();
  deps.buffer.modelStarted(fence.chatId, opened);
  try {
    const { summary, usage } = await summarize(resolved, request, signal);
    await commitCompaction(
      deps.db,
      attemptFence,
      {
        role: "system",
        visibility: "both",
        content: [
          {
            type: "compaction",
            summary: summary.trim() || "(The model wrote an empty summary.)",
            messages_compacted: request.compacted,
            prompt_tokens_before: lastStep?.promptTokens ?? null,
            reason,
            turn_complete: turnComplete(history),
          },
        ],
        runtimeMs: deps.clock.now() - opened,
        ...usage,
        costMicros: costMicros(usage, resolved.prices),
      },
      deps.held,
    );
  } catch (err) {
    // A stopped attempt's episode stays for the interrupt to bill; a failed one bills nothing.
    if (!attemptStopped(err, signal)) deps.buffer.end(fence.chatId);
    throw err;
  }
  deps.buffer.end(fence.chatId);
  deps.log.info(
    { chat_id: fence.chatId, reason, messages_compacted: request.compacted },
    "chat compacted",
  );
}

/** The compaction's model call, read to its end: the summary and the tokens it took. */
async function summarize(
  resolved: ResolvedModel,
  request: ReturnType<typeof compactionRequest>,
  signal: AbortSignal,
): Promise<{ summary: string; usage: { inputTokens: number; outputTokens: number } }> {
  const stream = streamStep(resolved.model, {
    system: request.system,
    messages: request.messages,
    abortSignal: signal,
  });
  let summary = "";
  let usage = { inputTokens: 0, outputTokens: 0 };
  for await (const p of stream) {
    if (p.type === "text-delta") summary += p.text;
    else if (p.type === "finish")
      usage = { inputTokens: p.usage.inputTokens ?? 0, outputTokens: p.usage.outputTokens ?? 0 };
  }
  // A signal that aborted as the stream ended: what it holds is not the summary.
  signal.throwIfAborted();
  return { summary, usage };
}
