// `tether chat ["message"]`: sends a message (to a new chat unless --chat), streams the answer
// and tool activity to the terminal, and interrupts the chat on Ctrl-C (a second Ctrl-C
// exits); without a message, an interactive session on a terminal (chat-session.ts), or the
// message read from a pipe. Without a token it uses the one it saved earlier, or, on a server
// with no users yet, creates the first (admin) user and saves its token (credentials.ts);
// chat-client.ts talks to the server, chat-turn.ts follows a turn, chat-human.ts and
// chat-json.ts print it.

import { CliError } from "./chat-errors.ts";
import { runOnce, runSession } from "./chat-session.ts";
import { findWorkspaceId, resolveToken, type TokenOptions } from "./credentials.ts";

export interface ChatCommandOptions extends TokenOptions {
  chat?: string;
  /** A new chat's workspace, by name or ID (default: the server's default workspace). */
  workspace?: string;
  /** The ID `workspace` names, once resolved. */
  workspaceId?: string;
  /** Print the stream's events as JSON lines instead of text. */
  json?: boolean;
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
