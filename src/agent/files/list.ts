// list-directory: the entries of one directory, named by path components relative to "/" or
// to the home directory. Entries are sorted by name; a symbolic link to a directory counts as
// a directory, so a caller can descend into it.

import { homedir } from "node:os";
import { join } from "node:path";
import { readdir, stat } from "node:fs/promises";
import { AnswerError, jsonAnswer, type Answer } from "../answer.ts";
import { ListDirectoryRequest, type ListDirectoryResponse } from "../../contract/types.ts";
import { answering, fileSystemError, parseBody, requireAbsolutePath } from "./errors.ts";

/** Lists the directory `body` (already JSON-parsed) names; `homeDir` resolves "home". */
export function listDirectory(body: unknown, homeDir: string = homedir()): Promise<Answer> {
  return answering(async () => {
    const request = parseBody(ListDirectoryRequest, body, "list-directory");
    const dir = requireAbsolutePath(
      join(base(request.relativity, homeDir), ...request.path),
      "The directory path",
    );
    const info = await stat(dir).catch((err: unknown) => {
      throw fileSystemError(err, dir, "listing");
    });
    if (!info.isDirectory()) {
      throw new AnswerError(400, `${dir} is not a directory. Use read-file-lines to read a file.`);
    }
    const entries = await readdir(dir, { withFileTypes: true }).catch((err: unknown) => {
      throw fileSystemError(err, dir, "listing");
    });
    const contents = await Promise.all(
      entries.map(async (entry) => {
        const path = join(dir, entry.name);
        const isDir = entry.isDirectory() || (entry.isSymbolicLink() && (await isDirectory(path)));
        return { name: entry.name, absolute_path_string: path, is_dir: isDir };
      }),
    );
    contents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const response: ListDirectoryResponse = {
      absolute_path: dir.split("/").filter((part) => part !== ""),
      absolute_path_string: dir,
      contents,
    };
    return jsonAnswer(200, response);
  });
}

function base(relativity: ListDirectoryRequest["relativity"], homeDir: string): string {
  switch (relativity) {
    case "root":
      return "/";
    case "home":
      return homeDir;
    default: {
      const unhandled: never = relativity;
      throw new Error(`unhandled relativity ${String(unhandled)}`);
    }
  }
}

/** Whether `path` leads to a directory; a broken link is not one. */
async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}
