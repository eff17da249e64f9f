// read-file-lines: a numbered window of a text file's lines for a model to read. The answer
// always fits the limits below (a long line is cut on a UTF-8 boundary, lines stop before the
// byte budget is exceeded), and a problem with the file is `success: false`, never an HTTP error.

import { readFile as readWholeFile } from "node:fs/promises";
import { AnswerError, jsonAnswer, type Answer } from "../answer.ts";
import type { ReadFileLinesResponse } from "../../contract/types.ts";
import { utf8Floor } from "../../contract/utf8.ts";
import { answering, fileSystemError, parseCount, requireAbsolutePath } from "./errors.ts";
import { requireRegularFile } from "./read.ts";

/** CONTRACT.md 7, read-file-lines. */
export const READ_FILE_LINES_LIMITS = {
  /** A larger file is refused. */
  maxFileSize: 1 << 20,
  /** A longer line is cut to this many bytes, marker included. */
  maxLineBytes: 1024,
  /** The most lines one answer holds, and the default `limit`. */
  maxResponseLines: 2000,
  /** The most bytes `content` holds. */
  maxResponseBytes: 32768,
} as const;

/** Ends a line cut to `maxLineBytes`. */
export const LINE_TRUNCATION_MARKER = " ... [truncated]";

export interface ReadFileLinesQuery {
  /** Absolute path of the file. */
  path?: string;
  /** 1-based number of the first line; default 1 (0 counts as 1). */
  offset?: string;
  /** Most lines to return; absent, 0 or above `maxResponseLines` means `maxResponseLines`. */
  limit?: string;
}

export function readFileLines(query: ReadFileLinesQuery): Promise<Answer> {
  return answering(async () => {
    // Bad query syntax is a 400; everything about the file itself is `success: false`.
    const path = requireAbsolutePath(query.path, "The path query parameter");
    const offset = Math.max(parseCount(query.offset, "offset") ?? 1, 1);
    const limit = Math.min(
      parseCount(query.limit, "limit") || READ_FILE_LINES_LIMITS.maxResponseLines,
      READ_FILE_LINES_LIMITS.maxResponseLines,
    );
    let response: ReadFileLinesResponse;
    try {
      response = await numberedLines(path, offset, limit);
    } catch (err) {
      const failure = fileSystemError(err, path, "reading");
      const detail = failure.detail === undefined ? "" : ` (${failure.detail})`;
      response = { success: false, error: failure.message + detail };
    }
    return jsonAnswer(200, response);
  });
}

async function numberedLines(
  path: string,
  offset: number,
  limit: number,
): Promise<ReadFileLinesResponse> {
  const { maxFileSize, maxResponseBytes } = READ_FILE_LINES_LIMITS;
  const tooLarge = (size: number) =>
    new AnswerError(
      400,
      `${path} is ${size} bytes, more than the ${maxFileSize} bytes read-file-lines reads. ` +
        "Use read-file with offset and limit, or grep, to get the part you need.",
    );
  const statSize = await requireRegularFile(path);
  if (statSize > maxFileSize) throw tooLarge(statSize);
  const data = await readWholeFile(path);
  if (data.length > maxFileSize) throw tooLarge(data.length);

  const lines = splitLines(data.toString("utf8"));
  if (offset > Math.max(lines.length, 1)) {
    const has = lines.length === 0 ? "is empty" : `has ${lines.length} lines`;
    throw new AnswerError(
      400,
      `Offset ${offset} is past the end of ${path}, which ${has}. ` +
        `Pass an offset from 1 to ${Math.max(lines.length, 1)}.`,
    );
  }

  const numbered: string[] = [];
  let bytes = 0;
  for (let i = offset - 1; i < lines.length && numbered.length < limit; i++) {
    const entry = `${i + 1}\t${cutLine(lines[i] ?? "")}`;
    const size = Buffer.byteLength(entry) + (numbered.length > 0 ? 1 : 0);
    if (bytes + size > maxResponseBytes) break;
    numbered.push(entry);
    bytes += size;
  }
  return {
    success: true,
    file_size: data.length,
    total_lines: lines.length,
    lines_read: numbered.length,
    content: numbered.join("\n"),
  };
}

/** The lines of `text` without their "\n" or "\r\n"; a final newline starts no extra line. */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
  return lines.map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line));
}

/**
 * `line` when it fits `maxLineBytes` UTF-8 bytes; otherwise its longest prefix that ends on a
 * character boundary and leaves room for the marker, plus the marker.
 */
export function cutLine(
  line: string,
  maxBytes: number = READ_FILE_LINES_LIMITS.maxLineBytes,
): string {
  if (line.length * 3 <= maxBytes) return line; // no UTF-16 unit takes more than 3 bytes
  const bytes = Buffer.from(line, "utf8");
  if (bytes.length <= maxBytes) return line;
  const end = utf8Floor(bytes, maxBytes - Buffer.byteLength(LINE_TRUNCATION_MARKER));
  return bytes.subarray(0, end).toString("utf8") + LINE_TRUNCATION_MARKER;
}
