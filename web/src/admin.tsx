import { useEffect, useState, type FormEvent, type ReactNode } from "react";
import { api, ApiError } from "./api.ts";

/** A list from the API, its reload, and its error (a 404 means the route does not exist yet). */
function useList<T>(path: string, key: string): [T[] | undefined, string | undefined, () => void] {
  const [items, setItems] = useState<T[]>();
  const [error, setError] = useState<string>();
  const [n, setN] = useState(0);
  useEffect(() => {
    api<Record<string, T[]>>("GET", path).then(
      (r) => setItems(r[key] ?? []),
      (e: Error) =>
        setError(
          e instanceof ApiError && e.status === 404 ? "Not available on this server." : e.message,
        ),
    );
  }, [path, key, n]);
  return [items, error, () => setN((x) => x + 1)];
}

function Form(p: {
  fields: string[];
  submit: (v: Record<string, string>) => Promise<unknown>;
  label: string;
  extra?: ReactNode;
}) {
  const [v, setV] = useState<Record<string, string>>({});
  const [error, setError] = useState<string>();
  const onSubmit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      await p.submit(v);
      setV({});
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form className="inline-form" onSubmit={(e) => void onSubmit(e)}>
      {p.fields.map((f) => (
        <input
          key={f}
          aria-label={f}
          placeholder={f}
          type={SECRET.has(f) ? "password" : "text"}
          value={v[f] ?? ""}
          onChange={(e) => setV({ ...v, [f]: e.target.value })}
        />
      ))}
      {p.extra}
      <button type="submit">{p.label}</button>
      {error && <span className="error">{error}</span>}
    </form>
  );
}

const cell = (v: unknown): string =>
  typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v);

const SECRET = new Set(["password", "api_key", "agent_token"]);

function Json({ rows }: { rows: object[] }) {
  if (rows.length === 0) return <p className="muted">None.</p>;
  const cols = Object.keys(rows[0]!).slice(0, 7);
  return (
    <div className="scroll">
      <table>
        <thead>
          <tr>
            {cols.map((c) => (
              <th key={c}>{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i}>
              {cols.map((c) => (
                <td key={c}>{cell((r as Record<string, unknown>)[c])}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Section<T extends object>(p: {
  title: string;
  path: string;
  keyName: string;
  form?: (reload: () => void) => ReactNode;
}) {
  const [items, error, reload] = useList<T>(p.path, p.keyName);
  return (
    <section>
      <h2>{p.title}</h2>
      {error ? <p className="muted">{error}</p> : items ? <Json rows={items} /> : <p>Loading…</p>}
      {!error && p.form?.(reload)}
    </section>
  );
}

export function AdminPage() {
  const [newToken, setNewToken] = useState<string>();
  return (
    <>
      <h1>Admin</h1>
      <Section
        title="Models"
        path="/models"
        keyName="models"
        form={(reload) => (
          <Form
            label="Add model"
            fields={["provider", "model", "base_url", "api_key"]}
            submit={async (v) => {
              await api("POST", "/models", {
                provider: v.provider,
                model: v.model,
                ...(v.base_url && { base_url: v.base_url }),
                ...(v.api_key && { api_key: v.api_key }),
              });
              reload();
            }}
          />
        )}
      />
      <Section
        title="Workspaces"
        path="/workspaces"
        keyName="workspaces"
        form={(reload) => (
          <Form
            label="Add workspace"
            fields={["name", "agent_url", "agent_token"]}
            submit={async (v) => {
              await api("POST", "/workspaces", {
                name: v.name,
                agent_url: v.agent_url,
                ...(v.agent_token && { agent_token: v.agent_token }),
              });
              reload();
            }}
          />
        )}
      />
      <Section
        title="Users"
        path="/users"
        keyName="users"
        form={(reload) => (
          <Form
            label="Add user"
            fields={["email", "password", "name", "role"]}
            submit={async (v) => {
              await api("POST", "/users", {
                email: v.email,
                password: v.password,
                name: v.name,
                role: v.role === "admin" ? "admin" : "member",
              });
              reload();
            }}
          />
        )}
      />
      <Section
        title="My API tokens"
        path="/tokens"
        keyName="tokens"
        form={(reload) => (
          <>
            <Form
              label="Create token"
              fields={["name"]}
              submit={async (v) => {
                const r = await api<{ token: string }>("POST", "/tokens", { name: v.name });
                setNewToken(r.token);
                reload();
              }}
            />
            {newToken && (
              <p>
                New token (shown once): <code>{newToken}</code>
              </p>
            )}
            <Form
              label="Revoke token"
              fields={["id"]}
              submit={async (v) => {
                await api("DELETE", `/tokens/${v.id}`);
                reload();
              }}
            />
          </>
        )}
      />
      <Section title="Audit log" path="/audit" keyName="entries" />
      <section>
        <h2>Workspace processes</h2>
        <p className="muted">
          A chat&apos;s background processes have no HTTP API yet; the agent can list them with its
          process tools.
        </p>
      </section>
    </>
  );
}
