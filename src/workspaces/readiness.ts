// Waiting for a chat's workspace before a model step. A tool call the model makes is
// committed when its step ends, and a workspace agent refuses every call committed within
// its first 2 s (CONTRACT.md 5, the age margin) as "started after the tool call" — which the
// chat would have to report as unknown. So a turn on a template workspace calls the model only
// once the workspace runs, its agent is connected, and the agent has been up longer than the
// margin: a restarted workspace never turns a new command into unknown. A stopped workspace
// is started (build reason `chat`); a start that fails during the turn ends it in error,
// naming the build. The last check happens under the workspace's row lock and records
// activity, so the lifecycle loop cannot queue a stop between it and the model step. A chat
// whose owner may no longer use the workspace neither starts it nor waits for it.

import type { AgentPool } from "../chatd/agents.ts";
import type { Chat, Fence } from "../chatd/chats.ts";
import type { Database } from "../chatd/db/index.ts";
import type { ChatMessage } from "../chatd/messages.ts";
import { finishError } from "../chatd/transitions/index.ts";
import { usableBy } from "../chatd/workspace-access.ts";
import { sleep, type Clock } from "../contract/index.ts";
import { agentUptimeMs } from "./agent-uptime.ts";
import { BuildInProgressError, queueBuild } from "./builds.ts";
import {
  AGENT_CONNECT_GRACE_MS,
  templateWorkspaceState,
  touchWorkspaces,
  workspaceState,
  type WorkspaceState,
} from "./workspace.ts";

/** The contract's age margin (2 s) and a safety half second: an agent this old takes any call. */
export const AGENT_WARM_UP_MS = 2_500;
/** The workspace is read again this often while a turn waits for it. */
export const WORKSPACE_POLL_MS = 250;

export interface ReadinessOptions {
  db: Database;
  agents: AgentPool;
  clock: Clock;
  pollMs?: number;
  warmUpMs?: number;
  connectTimeoutMs?: number;
  /** Workspaces seen without a template (templateWorkspaceState). */
  registered?: Set<string>;
}

/** What the turn does next. */
type Step =
  | { status: "ready" }
  | { status: "wait"; ms?: number }
  | { status: "start" }
  | { status: "fail"; message: string; detail?: string };

/** The decision for one look at the workspace, in the order of the module comment. */
export function nextStep(
  w: WorkspaceState,
  turnStartedAt: Date,
  uptimeMs: number | undefined,
  o: { warmUpMs: number; connectTimeoutMs: number },
): Step {
  const b = w.latestBuild;
  switch (w.status) {
    case "running": {
      if (w.connected) {
        const up = Math.max(uptimeMs ?? 0, w.connectedForMs ?? 0);
        return up >= o.warmUpMs ? { status: "ready" } : { status: "wait", ms: o.warmUpMs - up };
      }
      const since = b?.finishedAt ? w.now.getTime() - b.finishedAt.getTime() : 0;
      if (since > o.connectTimeoutMs)
        return {
          status: "fail",
          message: `The workspace ${w.name} runs, but its agent has not connected in ${Math.round(since / 1000)} s.`,
          detail: `Check the log of build ${b?.id ?? "?"} (the agent must reach the server's access URL), then stop and start the workspace.`,
        };
      return { status: "wait" };
    }
    case "starting":
    case "stopping":
      return { status: "wait" };
    case "stopped":
      return { status: "start" };
    case "failed":
      // A start that failed during this turn ends it; an older failure is tried again.
      if (b && b.transition === "start" && b.finishedAt && b.finishedAt >= turnStartedAt)
        return {
          status: "fail",
          message: `The workspace ${w.name} did not start: build ${b.id} failed: ${b.error ?? "see its log"}`,
          detail: `Read GET /api/v1/workspaces/${w.id}/builds/${b.id}/logs, fix the template or the machine, then send the message again.`,
        };
      return { status: "start" };
    case "deleting":
      return {
        status: "fail",
        message: `The workspace ${w.name} is being deleted, so the chat cannot run there.`,
        detail: "Start a new chat on another workspace.",
      };
    default: {
      const never: never = w.status;
      throw new Error(`unknown workspace status ${String(never)}`);
    }
  }
}

/** The instant the turn began: its latest user message. */
function turnStart(chat: Chat, history: ChatMessage[]): Date {
  for (let i = history.length - 1; i >= 0; i--)
    if (history[i]!.role === "user") return history[i]!.createdAt;
  return chat.updatedAt;
}

/**
 * Resolves true once the chat's workspace can take tool calls (always at once for a chat
 * without a template workspace); false when it ended the turn in error itself.
 */
export async function awaitWorkspace(
  o: ReadinessOptions,
  chat: Chat,
  history: ChatMessage[],
  fence: Fence,
  signal: AbortSignal,
): Promise<boolean> {
  const workspaceId = chat.workspaceId;
  if (!workspaceId) return true;
  const startedAt = turnStart(chat, history);
  const limits = {
    warmUpMs: o.warmUpMs ?? AGENT_WARM_UP_MS,
    connectTimeoutMs: o.connectTimeoutMs ?? AGENT_CONNECT_GRACE_MS,
  };
  const poll = o.pollMs ?? WORKSPACE_POLL_MS;
  for (;;) {
    signal.throwIfAborted();
    const w = await templateWorkspaceState(o.db, workspaceId, o.registered);
    if (!w) return true; // a registered workspace, or none any more: the tools say which
    // One its owner may no longer use is neither started, waited for nor kept active for the
    // chat: the model step's tool calls are refused (workspace-access.ts).
    if (!usableBy(chat.ownerId, { shared: w.shared, owner_id: w.ownerId })) return true;
    const uptime =
      w.status === "running" && w.connected
        ? await agentUptimeMs(o.agents, workspaceId, signal)
        : undefined;
    const step = nextStep(w, startedAt, uptime, limits);
    switch (step.status) {
      case "ready":
        if (await stillRunning(o.db, workspaceId, w.latestBuild?.id)) return true;
        break;
      case "start":
        await startForChat(o.db, chat, startedAt, limits);
        continue;
      case "fail":
        await finishError(o.db, fence, {
          message: step.message,
          ...(step.detail !== undefined && { detail: step.detail }),
        });
        return false;
      case "wait":
        await sleep(o.clock, Math.min(step.ms ?? poll, poll), signal);
        break;
      default: {
        const never: never = step;
        throw new Error(`unknown step ${String(never)}`);
      }
    }
  }
}

/** Under the row lock: the same start still stands; its activity is recorded. */
async function stillRunning(
  db: Database,
  workspaceId: string,
  buildId: string | undefined,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const r = await tx.query<{ latest_build_id: string | null }>(
      "SELECT latest_build_id FROM workspaces WHERE id = $1 FOR UPDATE",
      [workspaceId],
    );
    if (r.rows[0]?.latest_build_id !== buildId) return false;
    await touchWorkspaces(tx, [workspaceId]);
    return true;
  });
}

/** Queues a start for the chat's turn unless the workspace changed meanwhile. */
async function startForChat(
  db: Database,
  chat: Chat,
  turnStartedAt: Date,
  limits: { warmUpMs: number; connectTimeoutMs: number },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE", [chat.workspaceId]);
    const w = await workspaceState(tx, chat.workspaceId!);
    if (!w || nextStep(w, turnStartedAt, undefined, limits).status !== "start") return;
    try {
      await queueBuild(tx, {
        workspaceId: w.id,
        transition: "start",
        reason: "chat",
        createdBy: chat.ownerId,
      });
    } catch (err) {
      if (!(err instanceof BuildInProgressError)) throw err;
    }
  });
}
