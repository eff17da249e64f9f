// The files module's refusals. Every input check and every file system failure becomes an
// AnswerError carrying the status CONTRACT.md 7 names (400 bad input, 404 not found, 403
// permission, 500 otherwise), and `answering` turns it into the answer: nothing escapes as a throw.

import { isAbsolute } from "node:path";
import { AnswerError, errorAnswer, type Answer } from "../answer.ts";

/** A checked input, or the answer refusing it. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; answer: Answer };

/** Runs an input check; an AnswerError it throws becomes the refusing answer. */
export function parsing<T>(check: () => T): Parsed<T> {
  try {
    return { ok: true, value: check() };
  } catch (err) {
    if (err instanceof AnswerError) return { ok: false, answer: err.toAnswer() };
    throw err;
  }
}

/** The JSON value of a raw request body; a 400 when it is not JSON. */
export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new AnswerError(400, "Request body must be valid JSON.");
  }
}

/** Runs a handler body. An AnswerError becomes its answer; anything else becomes a 500. */
export async function answering(run: () => Promise<Answer>): Promise<Answer> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AnswerError) return err.toAnswer();
    return errorAnswer(
      500,
      "The file operation failed unexpectedly. Try again; if it keeps failing, report this error.",
      errorText(err),
    );
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The `code` of a Node.js system error (`ENOENT`, `EACCES`, ...), if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("code" in err)) return undefined;
  return typeof err.code === "string" ? err.code : undefined;
}

/**
 * `path` itself when it is a non-empty absolute path without NUL bytes; a 400 otherwise.
 * `what` names the value in the message, e.g. "The path query parameter".
 */
export function requireAbsolutePath(path: string | undefined, what: string): string {
  if (path === undefined || path === "") {
    throw new AnswerError(
      400,
      `${what} is required. Pass an absolute path such as /home/me/a.txt.`,
    );
  }
  if (path.includes("\0")) {
    throw new AnswerError(400, `${what} contains a NUL byte. Pass a real absolute path.`);
  }
  if (!isAbsolute(path)) {
    throw new AnswerError(
      400,
      `${what} must be an absolute path, got ${JSON.stringify(path)}. Start it with "/".`,
    );
  }
  return path;
}

/**
 * A query parameter holding a non-negative decimal integer. Absent or empty is `undefined`;
 * anything else that is not such an integer is a 400 naming the parameter.
 */
export function parseCount(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === "") return undefined;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n)) {
    throw new AnswerError(
      400,
      `The ${name} query parameter must be a non-negative whole number, got ${JSON.stringify(value)}.`,
    );
  }
  return n;
}

/** What a zod `safeParse` reports; kept structural so this file needs no zod types. */
interface ParseResult<T> {
  success: boolean;
  data?: T;
  error?: { issues: readonly { path: readonly PropertyKey[]; message: string }[] };
}

/** The body parsed by `schema`, or a 400 saying which fields of the `route` body are wrong. */
export function parseBody<T>(
  schema: { safeParse(body: unknown): ParseResult<T> },
  body: unknown,
  route: string,
): T {
  const result = schema.safeParse(body);
  if (result.success && result.data !== undefined) return result.data;
  const issues = (result.error?.issues ?? []).map((i) => `${fieldName(i.path)}: ${i.message}`);
  throw new AnswerError(
    400,
    `The ${route} request body is invalid: ${issues.join("; ")}. Fix the named fields and send it again.`,
  );
}

/** `files[0].edits[1].old_text` for the path `["files", 0, "edits", 1, "old_text"]`. */
function fieldName(path: readonly PropertyKey[]): string {
  let name = "";
  for (const key of path) {
    if (typeof key === "number") name += `[${key}]`;
    else name += name === "" ? String(key) : `.${String(key)}`;
  }
  return name === "" ? "body" : name;
}

/**
 * The answer for a failed file system call on `path`; `action` completes "Permission denied
 * <action>", e.g. "reading". Unknown failures are 500s with the system message as detail.
 */
export function fileSystemError(err: unknown, path: string, action: string): AnswerError {
  if (err instanceof AnswerError) return err;
  switch (errorCode(err) ?? "") {
    case "ENOENT":
      return new AnswerError(
        404,
        `Not found: ${path}. Check the path, or list its directory to find the right name.`,
      );
    case "EACCES":
    case "EPERM":
      return new AnswerError(
        403,
        `Permission denied ${action} ${path}. Use a path the agent's user may access.`,
      );
    case "ENOTDIR":
      return new AnswerError(400, `A parent of ${path} is not a directory. Check the path.`);
    case "EISDIR":
      return new AnswerError(400, `${path} is a directory, not a file. Pass the path of a file.`);
    case "ENAMETOOLONG":
      return new AnswerError(400, `The path ${path} is too long. Use a shorter path.`);
    case "ELOOP":
      return new AnswerError(400, `The path ${path} has a symbolic link loop. Fix the links.`);
    case "EIO":
    case "ENXIO":
    case "EINVAL":
    case "ENODEV":
    case "EOVERFLOW":
      // The file itself refuses this (e.g. /proc/self/mem, a device node behind a regular
      // file's name): the same request fails the same way, so it is a coded 4xx, not a 500.
      if (action === "reading") {
        return new AnswerError(
          400,
          `${path} cannot be read: the system refused the read (${errorCode(err)}). Read another file.`,
          errorText(err),
          "file_unreadable",
        );
      }
      return new AnswerError(500, `Failed ${action} ${path}.`, errorText(err));
    default:
      return new AnswerError(500, `Failed ${action} ${path}.`, errorText(err));
  }
}
