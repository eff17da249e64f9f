// What a chat's event stream says about its template workspace: an SSE event `workspace`
// (`{workspace_id, status, agent: {connected}, deadline, latest_build}`) when the stream opens
// and whenever that changes — so a client shows "the workspace is starting" while a turn
// waits for it. An open stream is also activity: it holds the workspace's idle deadline off.
// Changes come from build notifications, and from a short poll while the workspace is in
// transition (an agent's connection is not notified).

import type { ApiContext } from "./context.ts";
import {
  templateWorkspaceState,
  WORKSPACE_CHANNEL,
  workspaceState,
  type WorkspaceChange,
} from "../workspaces/index.ts";
import { templateFieldsOf, type TemplateWorkspaceFields } from "./template-workspaces.ts";

/** While a workspace is starting, stopping, or running without its agent, it is read this often. */
export const WORKSPACE_EVENT_POLL_MS = 1_000;

export type WorkspaceEvent = { workspace_id: string } & Pick<
  TemplateWorkspaceFields,
  "status" | "agent" | "deadline" | "latest_build"
>;

/**
 * Follows the workspace for one stream: `send` gets each new state. Resolves with the stop
 * (a no-op for a chat without a template workspace).
 */
export async function watchWorkspace(
  ctx: ApiContext,
  workspaceId: string | null,
  send: (e: WorkspaceEvent) => void,
  pollMs: number = WORKSPACE_EVENT_POLL_MS,
): Promise<() => void> {
  if (!workspaceId) return () => undefined;
  const first = await templateWorkspaceState(ctx.db, workspaceId, ctx.workspaces?.registered);
  if (!first) return () => undefined;
  const release = ctx.workspaces?.activity.hold(workspaceId);
  let closed = false;
  let last = "";
  let timer: NodeJS.Timeout | undefined;
  let reading = false;
  let again = false;

  const read = async (): Promise<void> => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        const w = await workspaceState(ctx.db, workspaceId);
        if (closed || !w) return;
        const f = templateFieldsOf(w);
        // The deadline moves with every activity; only a change of what the user reads counts.
        const e: WorkspaceEvent = {
          workspace_id: workspaceId,
          status: f.status,
          agent: f.agent,
          deadline: f.deadline,
          latest_build: f.latest_build,
        };
        const key = JSON.stringify([e.status, e.agent, e.latest_build]);
        if (key !== last) {
          last = key;
          send(e);
        }
        clearTimeout(timer);
        const settled = w.status === "stopped" || w.status === "failed";
        if (!settled && !(w.status === "running" && w.connected))
          timer = setTimeout(() => void read(), pollMs);
      } while (again && !closed);
    } catch {
      // A lost read is retried by the next change or poll.
      timer = setTimeout(() => void read(), pollMs);
    } finally {
      reading = false;
    }
  };

  const unlisten = await ctx.db.listen(WORKSPACE_CHANNEL, (payload) => {
    try {
      if ((JSON.parse(payload) as WorkspaceChange).workspace_id === workspaceId) void read();
    } catch {
      // not ours
    }
  });
  await read();
  return () => {
    closed = true;
    clearTimeout(timer);
    release?.();
    void unlisten().catch(() => undefined);
  };
}
