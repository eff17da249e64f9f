// write-file: replace or create one file with the request's bytes. Parents are created, the
// file is replaced atomically (atomic.ts), and an existing file keeps its mode.

import { mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { AnswerError, jsonAnswer, type Answer } from "../answer.ts";
import type { MessageResponse } from "../../contract/types.ts";
import { NEW_FILE_MODE, resolveTarget, writeAtomically } from "./atomic.ts";
import {
  answering,
  errorCode,
  fileSystemError,
  parsing,
  requireAbsolutePath,
  type Parsed,
} from "./errors.ts";

/** Writes `body` to `path` (the `path` query parameter, absolute). */
export function writeFile(path: string | undefined, body: Buffer): Promise<Answer> {
  return answering(async () => {
    const requested = requireAbsolutePath(path, "The path query parameter");
    try {
      let target = await resolveTarget(requested);
      let mode = await existingMode(target);
      await mkdir(dirname(target), { recursive: true }).catch((err: unknown) => {
        // mkdir reports a file where a parent directory should be as EEXIST or ENOTDIR.
        const code = errorCode(err);
        if (code === "EEXIST" || code === "ENOTDIR") {
          throw new AnswerError(400, `A parent of ${requested} is a file, not a directory.`);
        }
        throw err;
      });
      if (mode === undefined) {
        // Made parents can give `..` in the path a meaning it had not (`/a/new../..` is `/a`
        // once `new..` exists): what the path names now is what the rename replaces.
        target = await resolveTarget(requested);
        mode = await existingMode(target);
      }
      await writeAtomically(target, body, mode ?? NEW_FILE_MODE);
    } catch (err) {
      throw fileSystemError(err, requested, "writing");
    }
    const answer: MessageResponse = {
      message: `Successfully wrote to ${JSON.stringify(requested)}`,
    };
    return jsonAnswer(200, answer);
  });
}

/** The write-file `path` query parameter checked on its own, before a route records anything. */
export function parseWritePath(path: string | undefined): Parsed<string> {
  return parsing(() => requireAbsolutePath(path, "The path query parameter"));
}

/** The permission bits of the file at `path`, or undefined when there is none yet. */
async function existingMode(path: string): Promise<number | undefined> {
  try {
    const info = await stat(path);
    if (info.isDirectory()) {
      throw new AnswerError(400, `${path} is a directory; write-file only writes files.`);
    }
    return info.mode & 0o7777;
  } catch (err) {
    if (errorCode(err) === "ENOENT") return undefined;
    throw err;
  }
}
