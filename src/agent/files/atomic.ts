// Atomic file replacement for write-file and edit-files. The new bytes go to a fresh temp file
// in the target's own directory and are renamed over the target, so a reader sees the old file
// or the whole new one, never a partial write; a failed write removes its temp file.

import { randomBytes } from "node:crypto";
import { open, realpath, rename, rm, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { errorCode } from "./errors.ts";

/** The mode a file gets when the write creates it. */
export const NEW_FILE_MODE = 0o644;

/** Marks the temp files this module creates: `.<name>.tether-<hex>.tmp`. */
export const TEMP_FILE_MARK = ".tether-";

/**
 * The file a write to `path` must replace: the target of a symbolic link (so a link is never
 * replaced by a copy), or `path` itself when nothing exists there yet.
 */
export async function resolveTarget(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch (err) {
    if (errorCode(err) === "ENOENT") return path;
    throw err;
  }
}

/**
 * Replaces `path` with `data`, giving it `mode`. The parent directory must exist. The rename
 * is the only step that touches `path`; before it, a failure leaves `path` as it was.
 */
export async function writeAtomically(
  path: string,
  data: Buffer | string,
  mode: number,
): Promise<void> {
  // A long name is cut so the temp name stays within the 255-byte name limit.
  const temp = join(
    dirname(path),
    `.${basename(path).slice(0, 64)}${TEMP_FILE_MARK}${randomBytes(8).toString("hex")}.tmp`,
  );
  let handle: FileHandle | undefined;
  let created = false;
  try {
    handle = await open(temp, "wx", 0o600);
    created = true;
    await handle.writeFile(data);
    await handle.chmod(mode);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await rename(temp, path);
  } catch (err) {
    await handle?.close().catch(() => undefined);
    // Only a temp file this call created is removed; "wx" never opens someone else's.
    if (created) await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  }
}
