// The usage page's workspace part: how long template workspaces ran, per day and per user
// (the report's workspace_runtime_ms) — idle workspaces are what costs money.

import { duration, ErrorNote, useApi } from "./widgets.tsx";

interface Row {
  day?: string;
  user_id?: string;
  email?: string;
  workspace_runtime_ms: number;
}

function RunTable({ rows, head }: { rows: [string, number][]; head: string }) {
  return (
    <div className="scroll">
      <table>
        <thead>
          <tr>
            <th>{head}</th>
            <th>workspaces ran</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(([label, ms]) => (
            <tr key={label}>
              <td>{label}</td>
              <td>{duration(ms)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function WorkspaceUsage() {
  const byDay = useApi<{ rows: Row[] }>("/usage?group_by=day");
  const byUser = useApi<{ rows: Row[] }>("/usage?group_by=user");
  const error = byDay.error ?? byUser.error;
  if (error !== undefined) return <ErrorNote error={error} />;
  if (!byDay.data || !byUser.data) return null;
  const days = byDay.data.rows
    .filter((r) => r.workspace_runtime_ms > 0)
    .map((r): [string, number] => [r.day ?? "", r.workspace_runtime_ms]);
  const users = byUser.data.rows
    .filter((r) => r.workspace_runtime_ms > 0)
    .map((r): [string, number] => [r.email ?? r.user_id ?? "", r.workspace_runtime_ms]);
  return (
    <section aria-labelledby="workspace-usage-h" data-testid="workspace-usage">
      <h2 id="workspace-usage-h">Workspace running time</h2>
      {days.length === 0 ? (
        <p className="muted">No template workspace has run yet.</p>
      ) : (
        <>
          <p className="muted">How long template workspaces ran, stopped ones not counted.</p>
          <RunTable rows={days} head="day (UTC)" />
          <RunTable rows={users} head="user" />
        </>
      )}
    </section>
  );
}
