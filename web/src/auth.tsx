import { useCallback, useState, type FormEvent } from "react";
import { api, ApiError } from "./api.ts";
import { ErrorNote, useApi, useDocumentTitle, useInterval } from "./widgets.tsx";
import type { User } from "./types.ts";

/**
 * Setup (the first user) while no user exists, else sign-in. The server's detail shows with its
 * message ("password: must be at least 8 characters"); a throttled sign-in counts down its
 * Retry-After and the button waits for it.
 */
export function AuthPage({ onSignedIn }: { onSignedIn: (u: User) => void }) {
  // Undefined until the server says; a server that cannot say gets the sign-in form.
  const status = useApi<{ first_user_needed: boolean }>("/setup");
  const setup = status.data?.first_user_needed ?? (status.error !== undefined ? false : undefined);
  useDocumentTitle(setup ? "Set up" : "Sign in");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  /** A throttled sign-in may be tried again from then on (ms since the epoch). */
  const [until, setUntil] = useState<number>();
  const [now, setNow] = useState(() => Date.now());
  const tick = useCallback(() => setNow(Date.now()), []);
  useInterval(tick, until !== undefined ? 1000 : undefined);
  const wait = until === undefined ? 0 : Math.max(0, Math.ceil((until - now) / 1000));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      // The first user's answer carries an API token (the CLI's); the browser signs in like
      // everyone else, which sets its session cookie.
      if (setup) await api("POST", "/users/first", { email, password, name });
      await api("POST", "/auth/login", { email, password });
      onSignedIn(await api<User>("GET", "/me"));
    } catch (err) {
      setError(err);
      if (err instanceof ApiError && err.retryAfterS !== undefined) {
        setNow(Date.now());
        setUntil(Date.now() + err.retryAfterS * 1000);
      }
      setBusy(false);
    }
  };

  if (setup === undefined) return <p className="page">Loading…</p>;
  return (
    <main className="page narrow">
      <h1>{setup ? "Set up Tether" : "Sign in to Tether"}</h1>
      {setup && (
        <p>
          No user exists yet: create the first one, the owner, who runs users, models and
          workspaces.
        </p>
      )}
      <form className="stack" onSubmit={(e) => void submit(e)}>
        {setup && (
          <label>
            Name
            <input value={name} onChange={(e) => setName(e.target.value)} autoComplete="name" />
          </label>
        )}
        <label>
          Email
          <input
            type="email"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            autoComplete="username"
          />
        </label>
        <label>
          Password
          <input
            type="password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            autoComplete={setup ? "new-password" : "current-password"}
          />
        </label>
        <ErrorNote error={error} />
        {wait > 0 && (
          <p className="muted" data-testid="retry-after">
            You can try again in {wait} s.
          </p>
        )}
        <button type="submit" disabled={busy || wait > 0}>
          {setup ? "Create owner" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
