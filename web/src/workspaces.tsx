// The workspaces page (everyone): the caller's workspaces — those made from templates with
// their status, agent, deadline and start / stop / delete, and their builds with the log of
// the one selected, read again every second while it runs — and a form to make one from a
// template. Registered workspaces (by agent URL) are listed too; admins change them under Admin.

import { useCallback, useEffect, useState, type FormEvent } from "react";
import { api } from "./api.ts";
import {
  statusText,
  type AnyWorkspace,
  type Build,
  type NewTemplateWorkspace,
  type Template,
} from "./workspace-types.ts";
import {
  ConfirmButton,
  duration,
  ErrorNote,
  TableBox,
  text,
  useAction,
  useApi,
  useInterval,
  When,
} from "./widgets.tsx";
import "./workspaces.css";

/** The list is read again this often (statuses move while builds run). */
const LIST_POLL_MS = 2000;
/** A running build's log is read again this often. */
const LOG_POLL_MS = 1000;

export function WorkspaceBadge({ w }: { w: Pick<Required<AnyWorkspace>, "status" | "agent"> }) {
  return (
    <span className={`badge ws-${w.status}`} data-testid="workspace-status">
      {statusText(w)}
    </span>
  );
}

export function WorkspacesPage() {
  const list = useApi<{ workspaces: AnyWorkspace[] }>("/workspaces");
  const templates = useApi<{ templates: Template[] }>("/templates");
  useInterval(list.reload, LIST_POLL_MS);
  const action = useAction();
  const [selected, setSelected] = useState<string>();
  const workspaces = list.data?.workspaces;
  const templateName = (id: string | undefined) =>
    templates.data?.templates.find((t) => t.id === id)?.name ?? "";

  const act = (w: AnyWorkspace, what: "start" | "stop" | "delete") =>
    void action.run(`${what} ${w.id}`, async () => {
      if (what === "delete") await api("DELETE", `/workspaces/${w.id}`);
      else await api("POST", `/workspaces/${w.id}/${what}`);
      setSelected(w.id);
      list.reload();
    });

  return (
    <section aria-labelledby="workspaces-page-h">
      <h1 id="workspaces-page-h">Workspaces</h1>
      <p className="muted">
        Where chats run their commands. A workspace made from a template starts when you create it
        or when a chat needs it, and stops by itself after its idle time; its home is kept until you
        delete it.
      </p>
      <ErrorNote error={list.error} />
      <ErrorNote error={action.error} prefix="Not done" />
      {workspaces === undefined && list.error === undefined && <p>Loading…</p>}
      {workspaces && workspaces.length === 0 && <p className="muted">No workspaces yet.</p>}
      {workspaces && workspaces.length > 0 && (
        <TableBox label="Workspaces" stack>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Template</th>
              <th scope="col">Stops</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {workspaces.map((w) => (
              <tr key={w.id} data-testid="workspace" data-name={w.name}>
                <th scope="row">{w.name}</th>
                <td data-label="Status">
                  {w.status && w.agent ? (
                    <WorkspaceBadge w={{ status: w.status, agent: w.agent }} />
                  ) : w.health ? (
                    <span className={w.health.reachable ? "ok-text" : "error"}>
                      {w.health.reachable ? "reachable" : "unreachable"}
                    </span>
                  ) : (
                    <span className="muted">registered</span>
                  )}
                </td>
                <td data-label="Template">
                  {w.template_id ? templateName(w.template_id) : <span className="muted">—</span>}
                </td>
                <td data-label="Stops">
                  {w.template_id === undefined ? (
                    <span className="muted">—</span>
                  ) : w.ttl_ms === 0 ? (
                    <span className="muted">never by itself</span>
                  ) : w.deadline ? (
                    <span data-testid="deadline">
                      <When iso={w.deadline} style="compact" /> if idle
                    </span>
                  ) : (
                    <span className="muted">after {duration(w.ttl_ms ?? 0)} idle</span>
                  )}
                </td>
                <td className="actions-cell">
                  {w.template_id && (
                    <span className="actions">
                      {(w.status === "stopped" || w.status === "failed") && (
                        <button
                          type="button"
                          className="small"
                          aria-label={`Start ${w.name}`}
                          disabled={action.busy !== undefined}
                          onClick={() => act(w, "start")}
                        >
                          Start
                        </button>
                      )}
                      {(w.status === "running" || w.status === "failed") && (
                        <button
                          type="button"
                          className="secondary small"
                          aria-label={`Stop ${w.name}`}
                          disabled={action.busy !== undefined}
                          onClick={() => act(w, "stop")}
                        >
                          Stop
                        </button>
                      )}
                      <button
                        type="button"
                        className="secondary small"
                        aria-label={`Builds of ${w.name}`}
                        aria-pressed={selected === w.id}
                        onClick={() => setSelected(selected === w.id ? undefined : w.id)}
                      >
                        Builds
                      </button>
                      {w.status !== "deleting" && (
                        <ConfirmButton
                          label="Delete"
                          accessibleLabel={`Delete ${w.name}`}
                          prompt={`Delete ${w.name} and its home?`}
                          confirmLabel="Delete workspace"
                          disabled={action.busy !== undefined}
                          onConfirm={() => act(w, "delete")}
                        />
                      )}
                    </span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </TableBox>
      )}
      {selected && workspaces?.some((w) => w.id === selected) && (
        <Builds
          workspace={workspaces.find((w) => w.id === selected)!}
          refresh={workspaces.find((w) => w.id === selected)?.latest_build}
        />
      )}
      {templates.data && (
        <NewWorkspace
          templates={templates.data.templates}
          onCreated={(id) => {
            setSelected(id);
            list.reload();
          }}
        />
      )}
    </section>
  );
}

function Builds({ workspace, refresh }: { workspace: AnyWorkspace; refresh: unknown }) {
  const builds = useApi<{ builds: Build[] }>(
    `/workspaces/${workspace.id}/builds`,
    JSON.stringify(refresh),
  );
  const [open, setOpen] = useState<string>();
  const shown = open ?? builds.data?.builds[0]?.id;
  return (
    <section className="card" aria-labelledby="builds-h">
      <h2 id="builds-h">Builds of {workspace.name}</h2>
      <ErrorNote error={builds.error} />
      {builds.data && (
        <ul className="builds">
          {builds.data.builds.map((b) => (
            <li key={b.id}>
              <button
                type="button"
                className="link"
                aria-pressed={shown === b.id}
                onClick={() => setOpen(b.id)}
              >
                {b.transition} ({b.reason})
              </button>{" "}
              <span
                className={`badge ws-${b.status === "succeeded" ? "running" : b.status === "failed" ? "failed" : "starting"}`}
              >
                {b.status}
              </span>{" "}
              <When iso={b.created_at} style="compact" />
              {b.error && <span className="error small-text"> {b.error}</span>}
            </li>
          ))}
        </ul>
      )}
      {shown && builds.data && (
        <BuildLog
          workspaceId={workspace.id}
          build={builds.data.builds.find((b) => b.id === shown)!}
        />
      )}
    </section>
  );
}

function BuildLog({ workspaceId, build }: { workspaceId: string; build: Build }) {
  const [log, setLog] = useState<string>();
  const [n, setN] = useState(0);
  const live = build.status === "pending" || build.status === "running";
  const tick = useCallback(() => setN((x) => x + 1), []);
  useInterval(tick, live ? LOG_POLL_MS : undefined);
  useEffect(() => {
    let current = true;
    fetch(`/api/v1/workspaces/${workspaceId}/builds/${build.id}/logs`, {
      headers: { "x-tether-csrf": "1" },
    })
      .then((r) =>
        r.ok
          ? r.text()
          : r.status === 403
            ? "(only the workspace's owner or an admin reads its build logs)"
            : Promise.reject(new Error(`HTTP ${r.status}`)),
      )
      .then(
        (t) => current && setLog(t),
        () => undefined,
      );
    return () => {
      current = false;
    };
  }, [workspaceId, build.id, build.status, n]);
  return (
    <pre
      className="build-log"
      data-testid="build-log"
      aria-label={`Log of the ${build.transition} build`}
    >
      {log === undefined ? "Loading…" : log === "" ? "(no output yet)" : log}
    </pre>
  );
}

function NewWorkspace(p: { templates: Template[]; onCreated: (id: string) => void }) {
  const action = useAction();
  if (p.templates.length === 0)
    return (
      <p className="muted">
        No templates yet: an admin adds one under Admin → Templates (or with{" "}
        <code>bin/tether templates push DIR --name NAME</code>).
      </p>
    );
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const minutes = text(f, "ttl");
    const body: NewTemplateWorkspace = {
      name: text(f, "name"),
      template_id: text(f, "template"),
      ...(minutes !== "" && { ttl_ms: Math.round(Number(minutes) * 60_000) }),
    };
    void action.run("create", async () => {
      const w = await api<{ id: string }>("POST", "/workspaces", body);
      form.reset();
      p.onCreated(w.id);
    });
  };
  return (
    <form className="card" aria-labelledby="new-workspace-h" onSubmit={submit}>
      <h2 id="new-workspace-h">New workspace</h2>
      <div className="fields">
        <label>
          Name
          <input name="name" required autoComplete="off" />
        </label>
        <label>
          Template
          <select name="template" required>
            {p.templates.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
                {t.description && ` — ${t.description}`}
              </option>
            ))}
          </select>
        </label>
        <label>
          Stop after idle (minutes, 0 = never; empty: the template&apos;s)
          <input name="ttl" type="number" min="0" step="any" autoComplete="off" />
        </label>
      </div>
      <div className="form-end">
        <button type="submit" disabled={action.busy !== undefined}>
          Create workspace
        </button>
        <ErrorNote error={action.error} prefix="Not created" />
      </div>
    </form>
  );
}
