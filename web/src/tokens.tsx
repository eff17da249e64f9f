// The signed-in user's own tokens, for everyone: API tokens (for the CLI and scripts) with
// create and revoke, and the sessions of their signed-in browsers. A new token's secret is
// shown once, right after it is created; the server keeps only its hash. Also their password:
// changing it needs the current one and signs out their other browsers.

import { useState, type FormEvent } from "react";
import { api } from "./api.ts";
import type { IssuedToken, NewToken, PasswordChangeBody, Token } from "./types.ts";
import { ConfirmButton, ErrorNote, TableBox, text, useAction, useApi, When } from "./widgets.tsx";

function TokenTable(p: {
  label: string;
  tokens: Token[];
  revokeLabel: string;
  busy: string | undefined;
  revoke: (t: Token) => void;
}) {
  return (
    <TableBox label={p.label} stack>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Created</th>
          <th scope="col">Last used</th>
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        {p.tokens.map((t) => (
          <tr key={t.id} data-testid="token-row">
            <th scope="row">
              {t.name} {t.current && <span className="badge ok">this browser</span>}
            </th>
            <td data-label="Created">
              <When iso={t.created_at} />
            </td>
            <td data-label="Last used">
              <When iso={t.last_used_at} />
            </td>
            <td className="actions-cell">
              <ConfirmButton
                label={p.revokeLabel}
                accessibleLabel={`${p.revokeLabel} ${t.name}`}
                prompt={`${p.revokeLabel} “${t.name}”?`}
                confirmLabel={`Yes, ${p.revokeLabel.toLowerCase()}`}
                disabled={p.busy === t.id}
                onConfirm={() => p.revoke(t)}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </TableBox>
  );
}

function NewSecret({
  issued,
  onDone,
}: {
  issued: IssuedToken & { name: string };
  onDone: () => void;
}) {
  const [copied, setCopied] = useState<boolean>();
  const copy = () =>
    navigator.clipboard.writeText(issued.token).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  return (
    <div className="card secret" role="status" data-testid="new-token">
      <p>
        <strong>Token “{issued.name}” created.</strong> Copy it now: it will not be shown again.
      </p>
      <code className="secret-value">{issued.token}</code>
      <p className="row">
        <button type="button" className="small" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" className="secondary small" onClick={onDone}>
          Done
        </button>
        {copied === true && <span>Copied.</span>}
        {copied === false && <span>Copying failed: select the token and copy it.</span>}
      </p>
    </div>
  );
}

export function TokensPage() {
  const { data, error, reload } = useApi<{ tokens: Token[] }>("/tokens");
  const action = useAction();
  const [issued, setIssued] = useState<IssuedToken & { name: string }>();

  const create = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const body: NewToken = { name: text(new FormData(form), "name") };
    void action.run("create", async () => {
      const r = await api<IssuedToken>("POST", "/tokens", body);
      setIssued({ ...r, name: body.name.trim() });
      form.reset();
      reload();
    });
  };
  const revoke = (t: Token) =>
    void action.run(t.id, async () => {
      await api("DELETE", `/tokens/${t.id}`);
      if (issued?.id === t.id) setIssued(undefined);
      reload();
    });

  const apiTokens = data?.tokens.filter((t) => t.kind !== "session") ?? [];
  const sessions = data?.tokens.filter((t) => t.kind === "session") ?? [];
  return (
    <>
      <h1>Tokens</h1>
      <ErrorNote error={error} />
      <ErrorNote error={action.error} prefix="Could not do that" />
      <section aria-labelledby="api-tokens-h">
        <h2 id="api-tokens-h">API tokens</h2>
        <p className="muted">
          For the CLI and scripts: send one as <code>Authorization: Bearer &lt;token&gt;</code>. It
          acts as you until revoked.
        </p>
        {data === undefined && error === undefined && <p>Loading…</p>}
        {data && apiTokens.length === 0 && <p className="muted">No API tokens.</p>}
        {apiTokens.length > 0 && (
          <TokenTable
            label="API tokens"
            tokens={apiTokens}
            revokeLabel="Revoke"
            busy={action.busy}
            revoke={revoke}
          />
        )}
        {issued && <NewSecret issued={issued} onDone={() => setIssued(undefined)} />}
        <form className="card" aria-labelledby="new-token-h" onSubmit={create}>
          <h3 id="new-token-h">Create a token</h3>
          <div className="fields">
            <label>
              Name
              <input name="name" required placeholder="e.g. laptop CLI" autoComplete="off" />
            </label>
          </div>
          <div className="form-end">
            <button type="submit" disabled={action.busy !== undefined}>
              Create token
            </button>
          </div>
        </form>
      </section>
      <PasswordForm onChanged={reload} />
      {sessions.length > 0 && (
        <section aria-labelledby="sessions-h">
          <h2 id="sessions-h">Sessions</h2>
          <p className="muted">
            Your signed-in browsers. Signing one out ends it at its next request (this browser
            included).
          </p>
          <TokenTable
            label="Sessions"
            tokens={sessions}
            revokeLabel="Sign out"
            busy={action.busy}
            revoke={revoke}
          />
        </section>
      )}
    </>
  );
}

function PasswordForm({ onChanged }: { onChanged: () => void }) {
  const action = useAction();
  const [done, setDone] = useState(false);
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const body: PasswordChangeBody = {
      current_password: text(f, "current_password"),
      new_password: text(f, "new_password"),
    };
    setDone(false);
    void action.run("password", async () => {
      await api("POST", "/me/password", body);
      form.reset();
      setDone(true);
      onChanged();
    });
  };
  return (
    <section aria-labelledby="password-h">
      <h2 id="password-h">Password</h2>
      <form className="card" aria-labelledby="password-h" onSubmit={submit}>
        <div className="fields">
          <label>
            Current password
            <input
              name="current_password"
              type="password"
              required
              autoComplete="current-password"
            />
          </label>
          <label>
            New password (8 characters or more)
            <input
              name="new_password"
              type="password"
              required
              minLength={8}
              autoComplete="new-password"
            />
          </label>
        </div>
        <div className="form-end">
          <button type="submit" disabled={action.busy !== undefined}>
            Change password
          </button>
          {done && <span role="status">Password changed; your other browsers are signed out.</span>}
          <ErrorNote error={action.error} prefix="Not changed" />
        </div>
      </form>
    </section>
  );
}
