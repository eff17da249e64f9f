// `tether chat ["message"]`: sends a message (to a new chat unless --chat), streams the answer
// and tool activity to the terminal, and interrupts the chat on Ctrl-C (a second Ctrl-C
// exits); without a message, an interactive session on a terminal (chat-session.ts), or the
// message read from a pipe. Without a token it uses the one it saved earlier, or, on a server
// with no users yet, creates the first (admin) user and saves its token in the user's config
// dir (config.ts). This file holds the token; chat-client.ts talks to the server, chat-turn.ts
// follows a turn, chat-human.ts and chat-json.ts print it.

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { api, ApiError } from "./chat-client.ts";
import { CliError } from "./chat-errors.ts";
import { runOnce, runSession } from "./chat-session.ts";
import { cliTokenPath, saveFirstUser } from "./config.ts";

export { api } from "./chat-client.ts";

export interface ChatCommandOptions {
  server: string;
  token?: string;
  chat?: string;
  /** A new chat's workspace, by name or ID (default: the server's default workspace). */
  workspace?: string;
  /** The ID `workspace` names, once resolved. */
  workspaceId?: string;
  /** Where a bootstrapped token is kept (default cliTokenPath()). */
  tokenFile?: string;
  /** Print the stream's events as JSON lines instead of text. */
  json?: boolean;
}

export async function resolveToken(o: ChatCommandOptions): Promise<string> {
  const explicit = o.token ?? process.env.TETHER_TOKEN;
  if (explicit) return explicit;
  const file = o.tokenFile ?? cliTokenPath();
  const saved = await readFile(file, "utf8").catch(() => "");
  if (saved.trim()) return saved.trim();
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

/**
 * The command: one message (the argument, or stdin when it is a pipe) followed to the end of
 * its turn, or, on a terminal without a message, an interactive session.
 */
export async function runChat(text: string | undefined, o: ChatCommandOptions): Promise<void> {
  const interactive = text === undefined && process.stdin.isTTY && !o.json;
  const message = interactive ? "" : (text ?? (await readStdin()));
  if (!interactive && message.trim() === "")
    throw new CliError('Nothing to send: give a message (tether chat "…") or pipe one in.');
  const token = await resolveToken(o);
  if (o.workspace !== undefined)
    o = { ...o, workspaceId: await findWorkspaceId(o.server, token, o.workspace) };
  if (interactive) await runSession(o, token);
  else await runOnce(message, o, token);
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return "";
  let s = "";
  for await (const chunk of process.stdin) s += (chunk as Buffer).toString("utf8");
  return s;
}
