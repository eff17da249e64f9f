// Templates (admin): the Terraform folders workspaces are made from, with their version, idle
// time and how many workspaces use them. A folder is best pushed from git with
// `bin/tether templates push DIR --name N`; a one-file template can be written here. Changing
// the idle time or the files here makes workspaces take them (files: at their next start).

import { useState, type FormEvent } from "react";
import { api } from "../api.ts";
import type { NewTemplate, Template, TemplateChange } from "../workspace-types.ts";
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

const STARTER = `# Tether sets these for every build (TF_VAR_tether_*); declare the ones you use.
variable "tether_start_count" {
  type = number
}

resource "terraform_data" "compute" {
  count = var.tether_start_count
}
`;

function ttlText(ms: number): string {
  return ms === 0 ? "never" : duration(ms);
}

export function TemplatesSection() {
  const { data, error, reload } = useApi<{ templates: Template[] }>("/templates");
  const action = useAction();
  const [files, setFiles] = useState<{ id: string; files: Record<string, string> }>();

  const show = (t: Template) =>
    void action.run(`files ${t.id}`, async () => {
      if (files?.id === t.id) return setFiles(undefined);
      const full = await api<Template>("GET", `/templates/${t.id}`);
      setFiles({ id: t.id, files: full.files ?? {} });
    });
  const setTtl = (t: Template, value: string) =>
    void action.run(`ttl ${t.id}`, async () => {
      const body: TemplateChange = { default_ttl_ms: Math.round(Number(value) * 60_000) };
      await api("PATCH", `/templates/${t.id}`, body);
      reload();
    });

  return (
    <section aria-labelledby="templates-h">
      <h2 id="templates-h">Templates</h2>
      <p className="muted">
        Terraform folders that make workspaces: Docker containers, Kubernetes pods, VMs. Push one
        from a checkout with{" "}
        <code>bin/tether templates push examples/templates/docker --name docker</code>.
      </p>
      <ErrorNote error={error} />
      <ErrorNote error={action.error} prefix="Not done" />
      {data && data.templates.length === 0 && <p className="muted">No templates yet.</p>}
      {data && data.templates.length > 0 && (
        <TableBox label="Templates" stack>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Version</th>
              <th scope="col">Stops after idle</th>
              <th scope="col">Workspaces</th>
              <th scope="col">Changed</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {data.templates.map((t) => (
              <tr key={t.id} data-testid="template-row" data-name={t.name}>
                <th scope="row">
                  {t.name}
                  {t.description && <div className="muted small-text">{t.description}</div>}
                </th>
                <td data-label="Version">{t.version}</td>
                <td data-label="Stops after idle">
                  <form
                    className="inline"
                    onSubmit={(e) => {
                      e.preventDefault();
                      setTtl(t, text(new FormData(e.currentTarget), "minutes"));
                    }}
                  >
                    <span>{ttlText(t.default_ttl_ms)}</span>{" "}
                    <input
                      name="minutes"
                      type="number"
                      min="0"
                      step="any"
                      required
                      aria-label={`Idle minutes for ${t.name}`}
                      placeholder="min"
                      className="small-input"
                    />
                    <button type="submit" className="secondary small">
                      Set
                    </button>
                  </form>
                </td>
                <td data-label="Workspaces">{t.workspace_count}</td>
                <td data-label="Changed">
                  <When iso={t.updated_at} style="compact" />
                </td>
                <td className="actions-cell">
                  <span className="actions">
                    <button
                      type="button"
                      className="secondary small"
                      aria-label={`Files of ${t.name}`}
                      aria-pressed={files?.id === t.id}
                      onClick={() => show(t)}
                    >
                      Files
                    </button>
                    <ConfirmButton
                      label="Delete"
                      accessibleLabel={`Delete ${t.name}`}
                      prompt={`Delete the template ${t.name}?`}
                      confirmLabel="Delete template"
                      disabled={action.busy !== undefined || t.workspace_count > 0}
                      onConfirm={() =>
                        void action.run(t.id, async () => {
                          await api("DELETE", `/templates/${t.id}`);
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
      )}
      {files &&
        Object.entries(files.files).map(([path, body]) => (
          <details key={path} className="card" open>
            <summary>
              <code>{path}</code>
            </summary>
            <pre className="build-log">{body}</pre>
          </details>
        ))}
      {error === undefined && <AddTemplate onAdded={reload} />}
    </section>
  );
}

function AddTemplate({ onAdded }: { onAdded: () => void }) {
  const action = useAction();
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const minutes = text(f, "ttl");
    const body: NewTemplate = {
      name: text(f, "name"),
      description: text(f, "description"),
      files: { "main.tf": text(f, "main") },
      ...(minutes !== "" && { default_ttl_ms: Math.round(Number(minutes) * 60_000) }),
    };
    void action.run("add", async () => {
      await api("POST", "/templates", body);
      form.reset();
      onAdded();
    });
  };
  return (
    <form className="card" aria-labelledby="add-template-h" onSubmit={submit}>
      <h3 id="add-template-h">Add a one-file template</h3>
      <div className="fields">
        <label>
          Name
          <input name="name" required autoComplete="off" pattern="[A-Za-z0-9][A-Za-z0-9._\-]*" />
        </label>
        <label>
          Description
          <input name="description" autoComplete="off" />
        </label>
        <label>
          Stop after idle (minutes, 0 = never; default 60)
          <input name="ttl" type="number" min="0" step="any" autoComplete="off" />
        </label>
      </div>
      <label>
        main.tf
        <textarea name="main" rows={10} required defaultValue={STARTER} spellCheck={false} />
      </label>
      <div className="form-end">
        <button type="submit" disabled={action.busy !== undefined}>
          Add template
        </button>
        <ErrorNote error={action.error} prefix="Not added" />
      </div>
    </form>
  );
}
