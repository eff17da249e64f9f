// The CLI's own files, in the user's config dir (`$XDG_CONFIG_HOME/tether`, else
// `~/.config/tether`; dir 0700, files 0600), never in the current directory, which may be a
// workspace whose commands would read them: the token `tether chat` saved when it created a
// server's first user, and that user's generated password (shown nowhere, so set your own).
// Each is kept per server, one `origin value` line each: a token goes only to the server that
// made it, never to another one `--server` names.

import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** `$XDG_CONFIG_HOME/tether`, else `~/.config/tether` (the XDG base directory spec). */
export function cliConfigDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CONFIG_HOME;
  const home = env.HOME || os.homedir();
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(home, ".config"), "tether");
}

/** Where `tether chat` keeps the token it made. */
export function cliTokenPath(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(cliConfigDir(env), "cli-token");
}

/** Writes `text` to `file` (0600) in a dir made 0700. */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  await writeFile(file, text, { mode: 0o600 });
  await chmod(file, 0o600); // writeFile keeps the mode of a file that existed
}

/** Loopback hosts, where the quickstart's server runs. */
function isLoopback(origin: string): boolean {
  const host = new URL(origin).hostname;
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * The value kept for server `origin` in a file of `origin value` lines. A value alone on its
 * line, as earlier versions saved it, names no server: most likely the quickstart's, so it
 * serves a loopback server only and never leaves the machine.
 */
export function savedFor(text: string, origin: string): string | undefined {
  let alone: string | undefined;
  for (const line of text.split("\n")) {
    const [first, second, ...rest] = line.trim().split(/\s+/);
    if (!first || rest.length > 0) continue;
    if (second === undefined) alone = first;
    else if (first === origin) return second;
  }
  return alone !== undefined && isLoopback(origin) ? alone : undefined;
}

/** Keeps `value` for server `origin` in `file` (0600), beside the other servers' lines. */
async function saveFor(file: string, origin: string, value: string): Promise<void> {
  const text = await readFile(file, "utf8").catch(() => "");
  const others = text
    .split("\n")
    .filter((line) => line.trim() !== "" && line.trim().split(/\s+/)[0] !== origin);
  await writePrivateFile(file, [...others, `${origin} ${value}`].join("\n") + "\n");
}

/**
 * Saves the first user's token and generated password beside it, each on the line of the
 * server's origin; returns the message that says where they are and how to set a password (it
 * never holds the password).
 */
export async function saveFirstUser(
  server: string,
  tokenFile: string,
  token: string,
  password: string,
): Promise<string> {
  const origin = new URL(server).origin;
  const passwordFile = path.join(path.dirname(tokenFile), "initial-password");
  await saveFor(tokenFile, origin, token);
  await saveFor(passwordFile, origin, password);
  const passwordUrl = new URL("/api/v1/me/password", server).toString();
  return (
    `Created the first user admin@localhost (the owner); its token is saved in ${tokenFile} ` +
    `and its generated password in ${passwordFile}, each on the line of ${origin} (both ` +
    `readable only by you).\n` +
    `Set your own password: sign in to the web UI at ${server} with that password, or ` +
    `POST ${passwordUrl} {"current_password", "new_password"} with the token.\n`
  );
}
