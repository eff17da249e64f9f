// read-file: the raw bytes of a byte range of one regular file. It reads until `limit` bytes
// or end of file (not just the size stat reports, so /proc files read whole) and never blocks
// on a FIFO or device: anything but a regular file is refused before it is opened.

import { open, stat } from "node:fs/promises";
import { AnswerError, type Answer } from "../answer.ts";
import { answering, fileSystemError, parseCount, requireAbsolutePath } from "./errors.ts";

export const OCTET_STREAM = "application/octet-stream";

const CHUNK_BYTES = 1 << 20;

export interface ReadFileQuery {
  /** Absolute path of the file. */
  path?: string;
  /** First byte to read, a non-negative decimal integer; default 0. Past the end reads nothing. */
  offset?: string;
  /** Most bytes to read, a non-negative decimal integer; absent or 0 reads to end of file. */
  limit?: string;
}

export function readFile(query: ReadFileQuery): Promise<Answer> {
  return answering(async () => {
    const path = requireAbsolutePath(query.path, "The path query parameter");
    const offset = parseCount(query.offset, "offset") ?? 0;
    const limit = parseCount(query.limit, "limit") || Infinity;
    await requireRegularFile(path);

    const handle = await open(path, "r").catch((err: unknown) => {
      throw fileSystemError(err, path, "reading");
    });
    try {
      const chunks: Buffer[] = [];
      let position = offset;
      let remaining = limit;
      while (remaining > 0) {
        const chunk = Buffer.allocUnsafe(Math.min(remaining, CHUNK_BYTES));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
        if (bytesRead === 0) break;
        chunks.push(chunk.subarray(0, bytesRead));
        position += bytesRead;
        remaining -= bytesRead;
      }
      return { status: 200, contentType: OCTET_STREAM, body: Buffer.concat(chunks) };
    } catch (err) {
      throw fileSystemError(err, path, "reading");
    } finally {
      await handle.close();
    }
  });
}

/** Resolves with the file's size when `path` is a regular file; a 400/403/404 otherwise. */
export async function requireRegularFile(path: string): Promise<number> {
  const info = await stat(path).catch((err: unknown) => {
    throw fileSystemError(err, path, "reading");
  });
  if (info.isDirectory()) {
    throw new AnswerError(
      400,
      `${path} is a directory, not a file. Use list-directory to see what it contains.`,
    );
  }
  if (!info.isFile()) {
    throw new AnswerError(
      400,
      `${path} is not a regular file (it is a device, FIFO or socket). Pass the path of a file.`,
    );
  }
  return info.size;
}
