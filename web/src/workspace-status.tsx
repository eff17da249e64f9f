// What a chat shows about its template workspace, from the stream's `workspace` events: a line
// while it is starting (or stopped, or failed), so a turn that waits for it says why.

import { navigate } from "./router.ts";
import type { WorkspaceEvent } from "./workspace-types.ts";
import "./workspaces.css";

export function WorkspaceBanner({ w }: { w: WorkspaceEvent | undefined }) {
  if (!w || (w.status === "running" && w.agent.connected)) return null;
  const build = w.latest_build;
  const message =
    w.status === "starting"
      ? "The workspace is starting…"
      : w.status === "running"
        ? "The workspace is running; waiting for its agent to connect…"
        : w.status === "stopping"
          ? "The workspace is stopping."
          : w.status === "stopped"
            ? "The workspace is stopped; the next message starts it."
            : w.status === "deleting"
              ? "The workspace is being deleted."
              : `The workspace failed${build?.error ? `: ${build.error}` : "."}`;
  return (
    <p
      className={w.status === "failed" ? "workspace-banner failed" : "workspace-banner"}
      data-testid="workspace-banner"
      role="status"
    >
      {message}{" "}
      <a
        href="/workspaces"
        onClick={(e) => {
          e.preventDefault();
          navigate("/workspaces");
        }}
      >
        Workspaces
      </a>
    </p>
  );
}
