// The audit log, newest first, a page at a time ("Older entries" asks for the page before the
// last entry shown). User and model IDs show as an email or a model name when known; the full
// ID, the details and the user agent are in each cell's tooltip.

import { useEffect, useState } from "react";
import { api } from "../api.ts";
import type { AuditLogEntry, ModelView, User } from "../types.ts";
import { ErrorNote, TableBox, useAction, useApi, When } from "../widgets.tsx";

const PAGE = 100;

/** `key: value, key: value` with strings unquoted. */
function compact(details: Record<string, unknown>): string {
  return Object.entries(details)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(", ");
}

const shortId = (id: string) => (id.length > 12 ? `${id.slice(0, 8)}…` : id);

export function AuditSection() {
  const first = useApi<{ entries: AuditLogEntry[] }>(`/audit?limit=${PAGE}`);
  const users = useApi<{ users: User[] }>("/users");
  const models = useApi<{ models: ModelView[] }>("/models");
  const [older, setOlder] = useState<AuditLogEntry[]>([]);
  const [done, setDone] = useState(false);
  const more = useAction();

  // A reload starts over from the newest entries.
  useEffect(() => {
    setOlder([]);
    setDone(false);
  }, [first.data]);

  const entries = [...(first.data?.entries ?? []), ...older];
  /** A user's email or a model's name, with the name and full ID for the tooltip. */
  const known = (id: string): { label: string; title: string } => {
    const u = users.data?.users.find((x) => x.id === id);
    if (u) return { label: u.email, title: u.name ? `${u.name}, ${id}` : id };
    const m = models.data?.models.find((x) => x.id === id);
    if (m) return { label: `${m.provider}:${m.model}`, title: id };
    return { label: shortId(id), title: id };
  };
  const ref = (id: string | null) => {
    if (id === null) return <span className="muted">—</span>;
    const k = known(id);
    return <span title={k.title}>{k.label}</span>;
  };

  const loadOlder = () =>
    void more.run("older", async () => {
      const last = entries.at(-1);
      if (!last) return;
      const r = await api<{ entries: AuditLogEntry[] }>(
        "GET",
        `/audit?limit=${PAGE}&before=${last.id}`,
      );
      setOlder((o) => [...o, ...r.entries]);
      if (r.entries.length < PAGE) setDone(true);
    });

  return (
    <section aria-labelledby="audit-h">
      <h2 id="audit-h">Audit log</h2>
      <p className="muted">Who changed what, newest first.</p>
      <ErrorNote error={first.error} />
      {first.data === undefined && first.error === undefined && <p>Loading…</p>}
      {first.data && entries.length === 0 && <p className="muted">Nothing yet.</p>}
      {entries.length > 0 && (
        <TableBox label="Audit log">
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Action</th>
              <th scope="col">Who</th>
              <th scope="col">Target</th>
              <th scope="col">Details</th>
              <th scope="col">From</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => {
              const details = compact(e.details);
              return (
                <tr key={e.id} data-testid="audit-row">
                  <td>
                    <When iso={e.created_at} style="compact" />
                  </td>
                  <td>
                    <code className={e.action === "auth.login_failed" ? "error" : undefined}>
                      {e.action}
                    </code>
                  </td>
                  <td>{ref(e.user_id)}</td>
                  <td>{ref(e.target)}</td>
                  <td className="clip details" title={details}>
                    {details}
                  </td>
                  <td title={e.user_agent ?? undefined}>{e.ip ?? "—"}</td>
                </tr>
              );
            })}
          </tbody>
        </TableBox>
      )}
      <ErrorNote error={more.error} prefix="Could not load older entries" />
      <p className="row">
        <button type="button" className="secondary small" onClick={first.reload}>
          Refresh
        </button>
        {first.data && first.data.entries.length === PAGE && !done && (
          <button
            type="button"
            className="secondary small"
            disabled={more.busy !== undefined}
            onClick={loadOlder}
          >
            Older entries
          </button>
        )}
      </p>
    </section>
  );
}
