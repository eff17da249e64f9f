import { navigate } from "./router.ts";
import { isStaff, type Usage, type User } from "./types.ts";
import { ErrorNote, seconds, useApi, usd } from "./widgets.tsx";
import { WorkspaceUsage } from "./workspace-usage.tsx";

/** A report row: its key (hour, user or chat) and, for users and chats, the name to show. */
type Row = Usage & {
  hour?: string;
  user_id?: string;
  email?: string;
  chat_id?: string;
  title?: string;
};

function add(a: Usage, b: Usage): Usage {
  return {
    runtime_ms: a.runtime_ms + b.runtime_ms,
    model_runtime_ms: a.model_runtime_ms + b.model_runtime_ms,
    tool_runtime_ms: a.tool_runtime_ms + b.tool_runtime_ms,
    billed_calls: a.billed_calls + b.billed_calls,
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cost_micros: a.cost_micros + b.cost_micros,
  };
}

/** One group of a report: its key, the name shown for it, its totals. */
interface Group {
  key: string;
  label: string;
  u: Usage;
}

/**
 * Horizontal stacked bars: model runtime vs tool runtime per group, each bar with its label and
 * its billed time and cost. HTML, not a scaled SVG, so the labels keep the page's text size on a
 * phone (where each label goes above its bar).
 */
function Bars({ rows, title }: { rows: Group[]; title: string }) {
  const max = Math.max(1, ...rows.map((r) => r.u.runtime_ms));
  const pct = (ms: number) => `${(100 * ms) / max}%`;
  return (
    <figure className="bars" aria-label={title}>
      <figcaption>{title}</figcaption>
      {rows.map((r) => (
        <div
          key={r.key}
          className="bar-row"
          title={`${r.label}: model ${seconds(r.u.model_runtime_ms)}, tools ${seconds(r.u.tool_runtime_ms)}, ${usd(r.u.cost_micros)}`}
        >
          <span className="bar-label">{r.label}</span>
          <span className="bar-track">
            <span className="bar-model" style={{ width: pct(r.u.model_runtime_ms) }} />
            <span className="bar-tool" style={{ width: pct(r.u.tool_runtime_ms) }} />
          </span>
          <span className="bar-figures">{`${seconds(r.u.runtime_ms)} · ${usd(r.u.cost_micros)}`}</span>
        </div>
      ))}
      <p className="legend">
        <span className="swatch bar-model" /> model runtime <span className="swatch bar-tool" />{" "}
        tool runtime
      </p>
    </figure>
  );
}

function Table(p: {
  rows: Group[];
  head: string;
  /** Where a row's label links to (by its key), if anywhere. */
  href?: (key: string) => string;
}) {
  const { rows, head, href } = p;
  return (
    <div className="scroll">
      <table>
        <thead>
          <tr>
            <th>{head}</th>
            <th>billed time</th>
            <th>model</th>
            <th>tools</th>
            <th>billed calls</th>
            <th>tokens in/out</th>
            <th>cost</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.key}>
              <td>
                {href ? (
                  <a
                    href={href(r.key)}
                    onClick={(e) => {
                      e.preventDefault();
                      navigate(href(r.key));
                    }}
                  >
                    {r.label}
                  </a>
                ) : (
                  r.label
                )}
              </td>
              <td>{seconds(r.u.runtime_ms)}</td>
              <td>{seconds(r.u.model_runtime_ms)}</td>
              <td>{seconds(r.u.tool_runtime_ms)}</td>
              <td>{r.u.billed_calls}</td>
              <td>
                {r.u.input_tokens}/{r.u.output_tokens}
              </td>
              <td>{usd(r.u.cost_micros)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function UsagePage({ me }: { me: User }) {
  const byHour = useApi<{ rows: Row[] }>("/usage?group_by=hour");
  const byUser = useApi<{ rows: Row[] }>("/usage?group_by=user");
  const byChat = useApi<{ rows: Row[] }>("/usage?group_by=chat");
  const error = byHour.error ?? byUser.error ?? byChat.error;
  if (error !== undefined) return <ErrorNote error={error} />;
  if (!byHour.data || !byUser.data || !byChat.data) return <p>Loading…</p>;
  const data = { hour: byHour.data.rows, user: byUser.data.rows, chat: byChat.data.rows };
  const days = new Map<string, Usage>();
  for (const r of data.hour) {
    const day = (r.hour ?? "").slice(0, 10);
    const prev = days.get(day);
    days.set(day, prev ? add(prev, r) : r);
  }
  const perDay = [...days].sort().map(([label, u]) => ({ key: label, label, u }));
  const perUser = data.user.map((r) => ({ key: r.user_id ?? "", label: r.email ?? "", u: r }));
  const perChat = data.chat.map((r) => ({
    key: r.chat_id ?? "",
    label: r.title || "Untitled chat",
    u: r,
  }));
  const total = data.user.reduce<Usage | undefined>((t, r) => (t ? add(t, r) : r), undefined);
  return (
    <section>
      <h1>Usage</h1>
      <p className="muted">
        {isStaff(me) ? "Everyone's usage (you are an admin)." : "Your usage."} Billed time is model
        time plus tool time, a batch of parallel tool calls counted once.
      </p>
      {total ? (
        <p data-testid="usage-total">
          Billed time <strong>{seconds(total.runtime_ms)}</strong> (model{" "}
          {seconds(total.model_runtime_ms)}, tools {seconds(total.tool_runtime_ms)}),{" "}
          {total.billed_calls} billed {total.billed_calls === 1 ? "call" : "calls"}, cost{" "}
          {usd(total.cost_micros)}
        </p>
      ) : (
        <p>No usage yet.</p>
      )}
      <h2>Per day</h2>
      <Bars rows={perDay} title="Runtime per day" />
      <Table rows={perDay} head="day (UTC)" />
      <h2>Per user</h2>
      <Bars rows={perUser} title="Runtime per user" />
      <Table rows={perUser} head="user" />
      <h2>Per chat</h2>
      <Table rows={perChat} head="chat" href={(id) => `/chats/${id}`} />
      <WorkspaceUsage />
    </section>
  );
}
