// `tether chat ["message"]`: sends a message (to a new chat unless --chat), streams the answer
// and tool activity to the terminal, and interrupts the chat on Ctrl-C (a second Ctrl-C
// exits); without a message, an interactive session on a terminal (chat-session.ts), or the
// message read from a pipe. Without a token it uses the one it saved earlier, or, on a server
// with no users yet, creates the first (admin) user and saves its token. This file holds the
// token; chat-client.ts talks to the server, chat-turn.ts follows a turn, chat-human.ts and
// chat-json.ts print it.

import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { api, ApiError } from "./chat-client.ts";
import { CliError } from "./chat-errors.ts";
import { runOnce, runSession } from "./chat-session.ts";

export interface ChatCommandOptions {
  server: string;
  token?: string;
  chat?: string;
  /** Where a bootstrapped token is kept (default ./.tether/cli-token). */
  tokenFile?: string;
  /** Print the stream's events as JSON lines instead of text. */
  json?: boolean;
}

async function resolveToken(o: ChatCommandOptions): Promise<string> {
  const explicit = o.token ?? process.env.TETHER_TOKEN;
  if (explicit) return explicit;
  const file = o.tokenFile ?? path.join(".tether", "cli-token");
  const saved = await readFile(file, "utf8").catch(() => "");
  if (saved.trim()) return saved.trim();
  try {
    const password = randomBytes(18).toString("base64url");
    const first = await api<{ token: string }>(o.server, undefined, "POST", "/api/v1/users/first", {
      email: "admin@localhost",
      password,
      name: "Admin",
    });
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, first.token + "\n", { mode: 0o600 });
    process.stderr.write(
      `Created the first user admin@localhost (password ${password}); its token is saved in ${file}.\n`,
    );
    return first.token;
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      throw new Error("This server has users: pass --token TOKEN or set TETHER_TOKEN.");
    }
    throw err;
  }
}

/**
 * The command: one message (the argument, or stdin when it is a pipe) followed to the end of
 * its turn, or, on a terminal without a message, an interactive session.
 */
export async function runChat(text: string | undefined, o: ChatCommandOptions): Promise<void> {
  if (text === undefined && process.stdin.isTTY && !o.json) {
    await runSession(o, await resolveToken(o));
    return;
  }
  const message = text ?? (await readStdin());
  if (message.trim() === "")
    throw new CliError('Nothing to send: give a message (tether chat "…") or pipe one in.');
  await runOnce(message, o, await resolveToken(o));
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return "";
  let s = "";
  for await (const chunk of process.stdin) s += (chunk as Buffer).toString("utf8");
  return s;
}
