// The CLI's own files, in the user's config dir (`$XDG_CONFIG_HOME/tether`, else
// `~/.config/tether`; dir 0700, files 0600), never in the current directory, which may be a
// workspace whose commands would read them: the token `tether chat` saved when it created the
// first user, and that user's generated password (shown nowhere, so set your own).

import { chmod, mkdir, writeFile } from "node:fs/promises";
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

/**
 * Saves the first user's token and generated password beside it; returns the message that
 * says where they are and how to set a password (it never holds the password).
 */
export async function saveFirstUser(
  server: string,
  tokenFile: string,
  token: string,
  password: string,
): Promise<string> {
  const passwordFile = path.join(path.dirname(tokenFile), "initial-password");
  await writePrivateFile(tokenFile, token + "\n");
  await writePrivateFile(passwordFile, password + "\n");
  const passwordUrl = new URL("/api/v1/me/password", server).toString();
  return (
    `Created the first user admin@localhost (the owner); its token is saved in ${tokenFile} ` +
    `and its generated password in ${passwordFile} (both readable only by you).\n` +
    `Set your own password: sign in to the web UI at ${server} with that password, or ` +
    `POST ${passwordUrl} {"current_password", "new_password"} with the token.\n`
  );
}
