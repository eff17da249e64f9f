// edit-files: search-and-replace edits across several files as one all-or-nothing request.
// Every edit of every file is computed in memory before anything is written, so a request with
// any failing check or edit changes no file; then each file is replaced atomically, keeping its mode.

import { readFile, stat } from "node:fs/promises";
import { normalize } from "node:path";
import { AnswerError, jsonAnswer, type Answer } from "../answer.ts";
import { EditFilesRequest, type EditFilesResponse } from "../../contract/types.ts";
import { resolveTarget, writeAtomically } from "./atomic.ts";
import { unifiedDiff } from "./diff.ts";
import {
  answering,
  errorCode,
  fileSystemError,
  parseBody,
  parseJson,
  parsing,
  requireAbsolutePath,
  type Parsed,
} from "./errors.ts";
import { applyEdit, type MatchPass } from "./match.ts";

/** Applies the edits of `body` (already JSON-parsed) or, if any of them fails, none. */
export function editFiles(body: unknown): Promise<Answer> {
  return answering(() => applyChecked(checkRequest(body)));
}

/**
 * The checks that need no file (schema, some files, absolute unique paths, edits with
 * old_text) on a raw body, so a route can refuse bad input before it records anything.
 */
export function parseEditFilesRequest(body: Buffer): Parsed<EditFilesRequest> {
  return parsing(() => checkRequest(parseJson(body)));
}

/** Applies a request `parseEditFilesRequest` accepted, or, if any edit fails, none of it. */
export function applyEdits(request: EditFilesRequest): Promise<Answer> {
  return answering(() => applyChecked(request));
}

function checkRequest(body: unknown): EditFilesRequest {
  const request = parseBody(EditFilesRequest, body, "edit-files");
  checkShape(request);
  return request;
}

async function applyChecked(request: EditFilesRequest): Promise<Answer> {
  checkShape(request); // again, for a request that did not come through parseEditFilesRequest
  const planned: PlannedFile[] = [];
  for (const [i, file] of request.files.entries()) planned.push(await planFile(file, i + 1));
  refuseAliases(planned);
  await writeAll(planned);
  if (request.include_diff !== true) return jsonAnswer(200, {});
  const response: EditFilesResponse = {
    files: planned.map((f) => ({ path: f.path, diff: unifiedDiff(f.path, f.before, f.after) })),
  };
  return jsonAnswer(200, response);
}

type FileEdits = EditFilesRequest["files"][number];

/** One file's edits, computed and not yet written. */
interface PlannedFile {
  /** 1-based position in the request, for messages. */
  n: number;
  /** The path as the request gave it. */
  path: string;
  /** The file actually replaced: `path` with symbolic links resolved. */
  target: string;
  /** Permission bits the replacement keeps. */
  mode: number;
  before: string;
  after: string;
}

/** The checks that need no file: some files, absolute unique paths, edits with old_text. */
function checkShape(request: EditFilesRequest): void {
  if (request.files.length === 0) {
    throw new AnswerError(
      400,
      "No files to edit. Send at least one entry in files, each with a path and its edits.",
    );
  }
  const seen = new Map<string, number>();
  request.files.forEach((file, i) => {
    const n = i + 1;
    const path = requireAbsolutePath(file.path, `The path of file ${n}`);
    const first = seen.get(normalize(path));
    if (first !== undefined) {
      throw new AnswerError(
        400,
        `File ${n} repeats the path ${path} of file ${first}. ` +
          "List each file once and put all of its edits in its edits array.",
      );
    }
    seen.set(normalize(path), n);
    if (file.edits.length === 0) {
      throw new AnswerError(
        400,
        `File ${n} (${path}) has no edits. Add an edit with old_text and new_text, or remove the file.`,
      );
    }
    file.edits.forEach((edit, j) => {
      if (edit.old_text !== "") return;
      throw new AnswerError(
        400,
        `old_text is empty in ${path} (file ${n}, edit ${j + 1}). ` +
          "Copy the exact text to replace; to write a whole file, use write-file.",
      );
    });
  });
}

/** Reads file `n` and applies its edits in order, each to the result of the previous one. */
async function planFile(file: FileEdits, n: number): Promise<PlannedFile> {
  const { path } = file;
  let target: string;
  let mode: number;
  let data: Buffer;
  try {
    target = await resolveTarget(path);
    const info = await stat(target);
    if (!info.isFile()) {
      const what = info.isDirectory() ? "a directory" : "not a regular file";
      throw new AnswerError(400, `${path} (file ${n}) is ${what}. Pass the path of a text file.`);
    }
    mode = info.mode & 0o7777;
    data = await readFile(target);
  } catch (err) {
    if (errorCode(err) === "ENOENT") {
      throw new AnswerError(
        404,
        `${path} (file ${n}) does not exist. edit-files changes existing files only; ` +
          "check the path, or create the file with write-file.",
      );
    }
    throw fileSystemError(err, path, "reading");
  }
  const before = data.toString("utf8");
  if (!Buffer.from(before, "utf8").equals(data)) {
    throw new AnswerError(
      400,
      `${path} (file ${n}) is not valid UTF-8 text, so edit-files cannot change it safely. ` +
        "Use write-file to replace it.",
    );
  }
  let after = before;
  for (const [j, edit] of file.edits.entries()) {
    const outcome = applyEdit(after, edit);
    const where = `${path} (file ${n}, edit ${j + 1})`;
    const order =
      j === 0
        ? undefined
        : `Edits of one file apply in order: edit ${j + 1} searched the text as edits 1-${j} left it.`;
    switch (outcome.status) {
      case "applied":
        after = outcome.text;
        break;
      case "not_found":
        throw new AnswerError(
          400,
          `old_text was not found in ${where}. Read the file again and copy the text exactly.`,
          order,
        );
      case "ambiguous":
        throw new AnswerError(
          400,
          `old_text matches ${outcome.matches} places in ${where}. ` +
            "Add surrounding lines to make it unique, or set replace_all to change every match.",
          [PASS_NOTES[outcome.pass], order].filter((s) => s !== undefined).join(" "),
        );
      default: {
        const unhandled: never = outcome;
        throw new Error(`unhandled edit outcome ${JSON.stringify(unhandled)}`);
      }
    }
  }
  return { n, path, target, mode, before, after };
}

const PASS_NOTES: Record<MatchPass, string> = {
  exact: "The matches are exact.",
  trailing_whitespace: "The matches are whole lines, ignoring trailing whitespace.",
  surrounding_whitespace: "The matches are whole lines, ignoring leading and trailing whitespace.",
};

/** Two request paths that lead to one file (through a symbolic link) count as a duplicate. */
function refuseAliases(planned: PlannedFile[]): void {
  const seen = new Map<string, PlannedFile>();
  for (const file of planned) {
    const first = seen.get(file.target);
    if (first !== undefined) {
      throw new AnswerError(
        400,
        `File ${file.n} (${file.path}) is the same file as file ${first.n} (${first.path}). ` +
          "List each file once and put all of its edits in its edits array.",
      );
    }
    seen.set(file.target, file);
  }
}

/** Writes the changed files in request order; a failure names what was already written. */
async function writeAll(planned: PlannedFile[]): Promise<void> {
  const written: string[] = [];
  for (const file of planned) {
    if (file.after === file.before) continue;
    try {
      await writeAtomically(file.target, file.after, file.mode);
    } catch (err) {
      const failure = fileSystemError(err, file.path, "writing");
      const done =
        written.length === 0 ? "No file was changed." : `Already written: ${written.join(", ")}.`;
      throw new AnswerError(
        failure.status,
        `Failed to write ${file.path} (file ${file.n}). ${done}`,
        failure.detail === undefined ? failure.message : `${failure.message} ${failure.detail}`,
      );
    }
    written.push(file.path);
  }
}
