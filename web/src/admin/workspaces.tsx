// Workspaces: each agent with its owner, who may use it, and its health (the server asks every
// agent for its info when listing; "Check again" lists again). Staff share or unshare a
// workspace; the local one (no owner) is everyone's already. The agent token is write-only.

import type { FormEvent } from "react";
import { api } from "../api.ts";
import type {
  NewWorkspace,
  User,
  WorkspaceChange,
  WorkspaceHealth,
  WorkspaceView,
} from "../types.ts";
import {
  ConfirmButton,
  duration,
  ErrorNote,
  TableBox,
  text,
  useAction,
  useApi,
  When,
} from "../widgets.tsx";

function Health({ h }: { h: WorkspaceHealth | undefined }) {
  if (h === undefined) return <span className="muted">not checked</span>;
  return (
    <span className="health">
      {h.reachable ? (
        <span className="ok-text">
          <span aria-hidden="true">✓ </span>reachable
          {h.version !== undefined && <> · v{h.version}</>}
          {h.uptime_ms !== undefined && <> · up {duration(h.uptime_ms)}</>}
        </span>
      ) : (
        <span className="error">
          <span aria-hidden="true">✗ </span>unreachable
        </span>
      )}
      <span className="muted small-text">
        checked <When iso={h.checked_at} style="time" />
      </span>
    </span>
  );
}

export function WorkspacesSection() {
  const { data, error, reload } = useApi<{ workspaces: WorkspaceView[] }>("/workspaces");
  const users = useApi<{ users: User[] }>("/users");
  const action = useAction();
  const email = (id: string) => users.data?.users.find((u) => u.id === id)?.email ?? id;

  const share = (w: WorkspaceView) =>
    void action.run(w.id, async () => {
      const body: WorkspaceChange = { shared: !w.shared };
      await api("PATCH", `/workspaces/${w.id}`, body);
      reload();
    });

  return (
    <section aria-labelledby="workspaces-h">
      <h2 id="workspaces-h">Workspaces</h2>
      <p className="muted">
        Where chats run their tools: each is a workspace agent. A member&apos;s chats may use the
        local workspace, their own and the shared ones.
      </p>
      <ErrorNote error={error} />
      <ErrorNote error={action.error} prefix="Could not change the workspace" />
      {data === undefined && error === undefined && <p>Checking the agents…</p>}
      {data && data.workspaces.length === 0 && <p className="muted">No workspaces yet.</p>}
      {data && data.workspaces.length > 0 && (
        <>
          <TableBox label="Workspaces" stack>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Health</th>
                <th scope="col">Agent URL</th>
                <th scope="col">Owner</th>
                <th scope="col">Used by</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.workspaces.map((w) => (
                <tr key={w.id} data-testid="workspace-row">
                  <th scope="row">
                    {w.name} {w.is_default && <span className="badge ok">default</span>}
                  </th>
                  <td data-label="Health">
                    <Health h={w.health} />
                  </td>
                  <td data-label="Agent URL" className="clip" title={w.agent_url ?? "dials out"}>
                    {w.agent_url ?? "dials out"}
                  </td>
                  <td data-label="Owner">
                    {w.owner_id === null ? (
                      <span className="muted">the server</span>
                    ) : (
                      email(w.owner_id)
                    )}
                  </td>
                  <td data-label="Used by">
                    {w.owner_id === null
                      ? "everyone"
                      : w.shared
                        ? "everyone (shared)"
                        : "its owner"}
                  </td>
                  <td className="actions-cell">
                    <span className="actions">
                      {w.owner_id !== null && (
                        <button
                          type="button"
                          className="secondary small"
                          disabled={action.busy === w.id}
                          aria-label={`${w.shared ? "Unshare" : "Share"} ${w.name}`}
                          onClick={() => share(w)}
                        >
                          {w.shared ? "Unshare" : "Share"}
                        </button>
                      )}
                      <ConfirmButton
                        label="Delete"
                        accessibleLabel={`Delete ${w.name}`}
                        prompt={
                          w.owner_id === null
                            ? `Delete ${w.name}? The server adds it back at its next start.`
                            : `Delete ${w.name}?`
                        }
                        confirmLabel="Delete workspace"
                        disabled={action.busy === w.id}
                        onConfirm={() =>
                          void action.run(w.id, async () => {
                            await api("DELETE", `/workspaces/${w.id}`);
                            reload();
                          })
                        }
                      />
                    </span>
                  </td>
                </tr>
              ))}
            </tbody>
          </TableBox>
          <p>
            <button type="button" className="secondary small" onClick={reload}>
              Check again
            </button>
          </p>
        </>
      )}
      {error === undefined && <AddWorkspace onAdded={reload} />}
    </section>
  );
}

function AddWorkspace({ onAdded }: { onAdded: () => void }) {
  const action = useAction();
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const token = text(f, "agent_token");
    const body: NewWorkspace = {
      name: text(f, "name"),
      agent_url: text(f, "agent_url"),
      ...(token !== "" && { agent_token: token }),
    };
    void action.run("add", async () => {
      await api("POST", "/workspaces", body);
      form.reset();
      onAdded();
    });
  };
  return (
    <form className="card" aria-labelledby="add-workspace-h" onSubmit={submit}>
      <h3 id="add-workspace-h">Add a workspace</h3>
      <p className="muted small-text">
        Start an agent on the machine (<code>tether agent --listen …</code>), then give its address
        here. It is yours until you share it.
      </p>
      <div className="fields">
        <label>
          Name
          <input name="name" required autoComplete="off" />
        </label>
        <label>
          Agent URL
          <input
            name="agent_url"
            type="url"
            required
            placeholder="http://build-box:7777"
            autoComplete="off"
          />
        </label>
        <label>
          Agent token (optional)
          <input name="agent_token" type="password" autoComplete="new-password" />
        </label>
      </div>
      <div className="form-end">
        <button type="submit" disabled={action.busy !== undefined}>
          Add workspace
        </button>
        <ErrorNote error={action.error} prefix="Not added" />
      </div>
    </form>
  );
}
