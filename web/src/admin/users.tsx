// Users and roles: every user with a role picker that saves at once, a disable/enable switch
// (disabling ends the user's tokens and sessions at once), and the form that adds a user. The
// server's rules show as disabled choices: only an owner makes, unmakes or disables an owner,
// nobody disables themself; the last owner is the server's to refuse (its message is shown).

import { useState, type FormEvent } from "react";
import { api } from "../api.ts";
import type { NewUser, User, UserChange } from "../types.ts";
import { ConfirmButton, ErrorNote, TableBox, text, useAction, useApi, When } from "../widgets.tsx";

const ROLES: User["role"][] = ["owner", "admin", "member"];

function RoleOptions({ me }: { me: User }) {
  return ROLES.map((r) => (
    <option key={r} value={r} disabled={r === "owner" && me.role !== "owner"}>
      {r}
    </option>
  ));
}

export function UsersSection({ me }: { me: User }) {
  const { data, error, reload } = useApi<{ users: User[] }>("/users");
  const action = useAction();

  // The picked role shows at once; a refusal puts the stored one back (and says why).
  const [picked, setPicked] = useState<Record<string, User["role"]>>({});
  const setRole = (u: User, role: User["role"]) => {
    setPicked((p) => ({ ...p, [u.id]: role }));
    void action.run(u.id, async () => {
      const body: UserChange = { role };
      try {
        const saved = await api<User>("PATCH", `/users/${u.id}`, body);
        setPicked((p) => ({ ...p, [u.id]: saved.role }));
      } catch (e) {
        setPicked(({ [u.id]: _, ...rest }) => rest);
        throw e;
      }
    });
  };

  const setDisabled = (u: User, disabled: boolean) =>
    void action.run(u.id, async () => {
      const body: UserChange = { disabled };
      await api<User>("PATCH", `/users/${u.id}`, body);
      reload();
    });

  return (
    <section aria-labelledby="users-h">
      <h2 id="users-h">Users</h2>
      <p className="muted">
        Owners and admins manage users, models, workspaces and the audit log; members chat.
      </p>
      <ErrorNote error={error} />
      <ErrorNote error={action.error} prefix="User not changed" />
      {data === undefined && error === undefined && <p>Loading…</p>}
      {data && (
        <TableBox label="Users" stack>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">Created</th>
              <th scope="col">Access</th>
            </tr>
          </thead>
          <tbody>
            {data.users.map((u) => (
              <tr key={u.id} data-testid="user-row">
                <th scope="row">
                  {u.email} {u.id === me.id && <span className="badge">you</span>}
                </th>
                <td data-label="Name">{u.name || <span className="muted">—</span>}</td>
                <td data-label="Role">
                  <select
                    aria-label={`Role of ${u.email}`}
                    value={picked[u.id] ?? u.role}
                    disabled={action.busy === u.id || (u.role === "owner" && me.role !== "owner")}
                    onChange={(e) => setRole(u, e.target.value as User["role"])}
                  >
                    <RoleOptions me={me} />
                  </select>
                </td>
                <td data-label="Created">
                  <When iso={u.created_at} />
                </td>
                <td className="actions-cell" data-label="Access">
                  {u.disabled && <span className="badge">disabled</span>}{" "}
                  {u.disabled ? (
                    <button
                      type="button"
                      className="secondary small"
                      aria-label={`Enable ${u.email}`}
                      disabled={action.busy === u.id || (u.role === "owner" && me.role !== "owner")}
                      onClick={() => setDisabled(u, false)}
                    >
                      Enable
                    </button>
                  ) : (
                    <ConfirmButton
                      label="Disable"
                      accessibleLabel={`Disable ${u.email}`}
                      prompt={`Disable ${u.email}? Their tokens and sessions end now.`}
                      confirmLabel="Yes, disable"
                      disabled={
                        action.busy === u.id ||
                        u.id === me.id ||
                        (u.role === "owner" && me.role !== "owner")
                      }
                      onConfirm={() => setDisabled(u, true)}
                    />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </TableBox>
      )}
      {error === undefined && <AddUser me={me} onAdded={reload} />}
    </section>
  );
}

function AddUser({ me, onAdded }: { me: User; onAdded: () => void }) {
  const action = useAction();
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const body: NewUser = {
      email: text(f, "email"),
      name: text(f, "name"),
      password: text(f, "password"),
      role: text(f, "role") as User["role"],
    };
    void action.run("add", async () => {
      await api("POST", "/users", body);
      form.reset();
      onAdded();
    });
  };
  return (
    <form className="card" aria-labelledby="add-user-h" onSubmit={submit}>
      <h3 id="add-user-h">Add a user</h3>
      <div className="fields">
        <label>
          Email
          <input name="email" type="email" required autoComplete="off" />
        </label>
        <label>
          Name
          <input name="name" autoComplete="off" />
        </label>
        <label>
          Password (8 characters or more)
          <input
            name="password"
            type="password"
            required
            minLength={8}
            autoComplete="new-password"
          />
        </label>
        <label>
          Role
          <select name="role" defaultValue="member">
            <RoleOptions me={me} />
          </select>
        </label>
      </div>
      <div className="form-end">
        <button type="submit" disabled={action.busy !== undefined}>
          Add user
        </button>
        <ErrorNote error={action.error} prefix="Not added" />
      </div>
    </form>
  );
}
