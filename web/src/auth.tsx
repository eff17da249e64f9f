import { useState, type FormEvent } from "react";
import { api } from "./api.ts";
import { useApi } from "./widgets.tsx";
import type { User } from "./types.ts";

/** Setup (the first user) while no user exists, else sign-in. */
export function AuthPage({ onSignedIn }: { onSignedIn: (u: User) => void }) {
  // Undefined until the server says; a server that cannot say gets the sign-in form.
  const status = useApi<{ first_user_needed: boolean }>("/setup");
  const setup = status.data?.first_user_needed ?? (status.error !== undefined ? false : undefined);
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

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
      setError(err instanceof Error ? err.message : String(err));
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
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {setup ? "Create owner" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
