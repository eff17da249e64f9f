// Where the server keeps its state and the key that seals its secrets, and the rules that keep
// both out of reach: the data dir follows the platform's convention (never the current
// directory, which is the default workspace), is never inside the local workspace nor holds
// it, and is 0700 with its files 0600. The key comes from TETHER_SECRET_KEY or a key file; the
// embedded setup makes one in the data dir on first start; Postgres without one refuses.

import { chmodSync, lstatSync, readdirSync } from "node:fs";
import { mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { generateSecretKey, parseSecretKey, type SecretKeys } from "../chatd/secrets/index.ts";

/** A configuration the server refuses to start with; its message says what to do. */
export class ServerConfigError extends Error {
  override readonly name = "ServerConfigError";
}

/** `$XDG_DATA_HOME/tether`, else `~/.local/share/tether` (the XDG base directory spec). */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  const home = env.HOME || os.homedir();
  return path.join(
    xdg && path.isAbsolute(xdg) ? xdg : path.join(home, ".local", "share"),
    "tether",
  );
}

/** The name of the key file the embedded setup makes in its data dir. */
export const GENERATED_KEY_FILE = "secret.key";

/** `p` with every symlink resolved, also when its last parts do not exist yet. */
async function resolvedPath(p: string): Promise<string> {
  const abs = path.resolve(p);
  const rest: string[] = [];
  let at = abs;
  for (;;) {
    try {
      return path.join(await realpath(at), ...rest.reverse());
    } catch {
      const parent = path.dirname(at);
      if (parent === at) return abs;
      rest.push(path.basename(at));
      at = parent;
    }
  }
}

function isWithin(inner: string, outer: string): boolean {
  const rel = path.relative(outer, inner);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * Refuses a data dir inside the local workspace (its commands would read the database, the key
 * and the agent's token) and a workspace inside the data dir, symlinks resolved.
 */
export async function checkDataDirOutsideWorkspace(
  dataDir: string,
  workspaceDir: string,
): Promise<void> {
  const data = await resolvedPath(dataDir);
  const ws = await resolvedPath(workspaceDir);
  if (isWithin(data, ws)) {
    throw new ServerConfigError(
      `The data dir ${data} is inside the local workspace ${ws}: commands run there could read the database, its key and the agent's token. ` +
        `Put it outside with --data-dir (the default is ${defaultDataDir()}), choose another --workspace-dir, or pass --no-local-workspace.`,
    );
  }
  if (isWithin(ws, data)) {
    throw new ServerConfigError(
      `The local workspace ${ws} is inside the data dir ${data}. Choose a --workspace-dir outside it.`,
    );
  }
}

/**
 * Dirs 0700, files 0600, everywhere under `dir` (symlinks are left alone). Synchronous on
 * purpose: the embedded database's directory holds about a thousand files, and a walk that
 * awaited each lstat took half a second of a start where this takes milliseconds.
 */
export function restrictModes(dir: string): void {
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) return;
  if (st.isDirectory()) {
    if ((st.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
    for (const name of readdirSync(dir)) restrictModes(path.join(dir, name));
  } else if ((st.mode & 0o777) !== 0o600) {
    chmodSync(dir, 0o600);
  }
}

/** Makes the data dir (0700) and restricts what an earlier version left in it. */
export async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  restrictModes(dataDir);
}

export interface SecretKeySources {
  /** TETHER_SECRET_KEY. */
  key?: string | undefined;
  /** --secret-key-file. */
  keyFile?: string | undefined;
  /** TETHER_SECRET_KEY_OLD: keys being rotated out, separated by commas or white space. */
  oldKeys?: string | undefined;
  /** --old-secret-key-file. */
  oldKeyFile?: string | undefined;
  /** With the embedded database, the data dir: the key is made there when none is given. */
  embeddedDataDir?: string | undefined;
}

export const MAKE_KEY_HINT =
  "Make one with `openssl rand -base64 32 > /etc/tether/secret.key && chmod 600 /etc/tether/secret.key` " +
  "and start every replica with --secret-key-file /etc/tether/secret.key, or set TETHER_SECRET_KEY=$(openssl rand -base64 32) " +
  "(without openssl: `node -e \"console.log(require('node:crypto').randomBytes(32).toString('base64'))\"`); every replica needs the same key.";

async function readKeyFile(file: string, what: string): Promise<Buffer> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ServerConfigError(`Could not read the ${what} ${file}: ${(err as Error).message}`);
  }
  return parseKey(text, `The ${what} ${file}`);
}

function parseKey(text: string, source: string): Buffer {
  try {
    return parseSecretKey(text, source);
  } catch (err) {
    throw new ServerConfigError((err as Error).message);
  }
}

/** Reads the embedded setup's key, making it (0600) on first start. */
async function generatedKey(dataDir: string): Promise<Buffer> {
  const file = path.join(dataDir, GENERATED_KEY_FILE);
  try {
    await writeFile(file, generateSecretKey() + "\n", { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  return readKeyFile(file, "secret key file");
}

/**
 * The keys that seal the server's secrets: the current one from TETHER_SECRET_KEY or
 * --secret-key-file (or, embedded, the data dir's own), and the old ones being rotated out.
 */
export async function loadSecretKeys(s: SecretKeySources): Promise<SecretKeys> {
  if (s.key && s.keyFile) {
    throw new ServerConfigError("Set either TETHER_SECRET_KEY or --secret-key-file, not both.");
  }
  const old: Buffer[] = [];
  for (const k of (s.oldKeys ?? "").split(/[\s,]+/).filter((x) => x !== ""))
    old.push(parseKey(k, "TETHER_SECRET_KEY_OLD"));
  if (s.oldKeyFile) old.push(await readKeyFile(s.oldKeyFile, "old secret key file"));
  let current: Buffer;
  if (s.key) current = parseKey(s.key, "TETHER_SECRET_KEY");
  else if (s.keyFile) current = await readKeyFile(s.keyFile, "secret key file");
  else if (s.embeddedDataDir !== undefined)
    return { current: await generatedKey(s.embeddedDataDir), old };
  else
    throw new ServerConfigError(
      `A server on Postgres needs a secret key: provider keys, agent tokens and the replica secret are stored encrypted with it. ${MAKE_KEY_HINT}`,
    );
  // A key given after the embedded setup made its own: what the old one sealed is re-sealed.
  if (s.embeddedDataDir !== undefined) {
    const made = await readFile(path.join(s.embeddedDataDir, GENERATED_KEY_FILE), "utf8").catch(
      () => undefined,
    );
    if (made !== undefined) old.push(parseKey(made, "The data dir's secret.key"));
  }
  return { current, old };
}
