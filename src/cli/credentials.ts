// The CLI's token and workspace lookups, shared by `tether chat`, `templates` and `workspaces`:
// the token given (--token, TETHER_TOKEN), else the one saved earlier for this server, else, on
// a server with no users yet, the first (admin) user's, created and saved in the user's config
// dir (config.ts). A token saved for one server is never sent to another.
// A module of its own so the commands that need only these do not load the chat's terminal UI.

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { api, ApiError } from "./chat-client.ts";
import { CliError } from "./chat-errors.ts";
import { cliTokenPath, savedFor, saveFirstUser } from "./config.ts";

/** Where a command finds its token. */
export interface TokenOptions {
  server: string;
  token?: string;
  /** Where a bootstrapped token is kept (default cliTokenPath()). */
  tokenFile?: string;
}

export async function resolveToken(o: TokenOptions): Promise<string> {
  const explicit = o.token ?? process.env.TETHER_TOKEN;
  if (explicit) return explicit;
  const file = o.tokenFile ?? cliTokenPath();
  const saved = savedFor(await readFile(file, "utf8").catch(() => ""), new URL(o.server).origin);
  if (saved) return saved;
  try {
    const password = randomBytes(18).toString("base64url");
    const first = await api<{ token: string }>(o.server, undefined, "POST", "/api/v1/users/first", {
      email: "admin@localhost",
      password,
      name: "Admin",
    });
    process.stderr.write(await saveFirstUser(o.server, file, first.token, password));
    return first.token;
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      throw new CliError("This server has users: pass --token TOKEN or set TETHER_TOKEN.");
    }
    throw err;
  }
}

/** The ID of the workspace named or numbered `nameOrId` the caller may see. */
export async function findWorkspaceId(
  server: string,
  token: string,
  nameOrId: string,
): Promise<string> {
  const { workspaces } = await api<{ workspaces: { id: string; name: string }[] }>(
    server,
    token,
    "GET",
    "/api/v1/workspaces",
  );
  const matches = workspaces.filter((w) => w.id === nameOrId || w.name === nameOrId);
  if (matches.length === 1) return matches[0]!.id;
  throw new CliError(
    matches.length === 0
      ? `No workspace is named ${nameOrId}; see bin/tether workspaces list.`
      : `${matches.length} workspaces are named ${nameOrId}; give its ID.`,
  );
}
