// A process's output buffer (CONTRACT.md 7): it keeps the first 16 KiB and the last 16 KiB of
// everything written and counts every byte, so memory stays bounded however much a process
// prints, and a render always says exactly how many bytes it left out.

import type { ProcessTruncation } from "../../contract/types.ts";

/** Bytes kept from the start of the output. */
export const HEAD_BYTES = 16 * 1024;
/** Bytes kept from the end of the output (a ring). */
export const TAIL_BYTES = 16 * 1024;
/** A rendered line is at most this many bytes, its suffix included. */
export const MAX_LINE_BYTES = 2048;
export const LINE_TRUNCATION_SUFFIX = " ... [truncated]";

const SUFFIX = Buffer.from(LINE_TRUNCATION_SUFFIX);
const LINE_KEEP_BYTES = MAX_LINE_BYTES - SUFFIX.length; // 2032
const NEWLINE = 0x0a;
const NEWLINE_BYTES = Buffer.from("\n");

export interface RenderedOutput {
  output: string;
  /** Set only when bytes were dropped (more than HEAD_BYTES + TAIL_BYTES were written). */
  truncated?: ProcessTruncation;
}

export class OutputBuffer {
  /** Allocated on the first write; bytes [0, #headLen) are the output's first bytes. */
  #head: Buffer | undefined;
  #headLen = 0;
  /** Allocated when the head is full; holds the last bytes, oldest at #tailPos once full. */
  #tail: Buffer | undefined;
  #tailPos = 0;
  #tailFull = false;
  /** Every byte ever written, kept or not. */
  #total = 0;

  /** Bytes written so far, kept or not. */
  get totalBytes(): number {
    return this.#total;
  }

  /** Appends a chunk: copies at most HEAD_BYTES + TAIL_BYTES of it, never scans it. */
  write(chunk: Uint8Array): void {
    const n = chunk.length;
    if (n === 0) return;
    this.#total += n;
    let off = 0;
    if (this.#headLen < HEAD_BYTES) {
      this.#head ??= Buffer.allocUnsafe(HEAD_BYTES);
      off = Math.min(HEAD_BYTES - this.#headLen, n);
      this.#head.set(chunk.subarray(0, off), this.#headLen);
      this.#headLen += off;
      if (off === n) return;
    }
    this.#writeTail(chunk, off);
  }

  #writeTail(chunk: Uint8Array, off: number): void {
    const tail = (this.#tail ??= Buffer.allocUnsafe(TAIL_BYTES));
    const rest = chunk.length - off;
    if (rest >= TAIL_BYTES) {
      // Only the chunk's last TAIL_BYTES survive; lay them out from 0.
      tail.set(chunk.subarray(chunk.length - TAIL_BYTES), 0);
      this.#tailPos = 0;
      this.#tailFull = true;
      return;
    }
    const first = Math.min(TAIL_BYTES - this.#tailPos, rest);
    tail.set(chunk.subarray(off, off + first), this.#tailPos);
    this.#tailPos += first;
    if (this.#tailPos === TAIL_BYTES) {
      this.#tailPos = 0;
      this.#tailFull = true;
    }
    if (first < rest) {
      tail.set(chunk.subarray(off + first), 0);
      this.#tailPos = rest - first;
    }
  }

  /** The tail's bytes, oldest first (a copy when the ring has wrapped). */
  #tailBytes(): Buffer {
    if (!this.#tail) return Buffer.alloc(0);
    if (!this.#tailFull) return this.#tail.subarray(0, this.#tailPos);
    return Buffer.concat([
      this.#tail.subarray(this.#tailPos),
      this.#tail.subarray(0, this.#tailPos),
    ]);
  }

  /**
   * The output as the contract shows it: long lines capped in head and tail separately,
   * then head + tail, or head + omission marker + tail when bytes were dropped. Decoded as
   * UTF-8 here; `retained_bytes` is the UTF-8 byte length of the returned string.
   */
  render(): RenderedOutput {
    const head = capLines(this.#head ? this.#head.subarray(0, this.#headLen) : Buffer.alloc(0));
    const rawTail = this.#tailBytes();
    const tail = capLines(rawTail);
    const omitted = this.#total - this.#headLen - rawTail.length;
    if (omitted === 0) {
      // Head and tail are contiguous: decode them together so a character split at
      // the head's end stays whole.
      return { output: Buffer.concat([head, tail]).toString("utf8") };
    }
    const output =
      head.toString("utf8") + `\n\n... [omitted ${omitted} bytes] ...\n\n` + tail.toString("utf8");
    return {
      output,
      truncated: {
        original_bytes: this.#total,
        retained_bytes: Buffer.byteLength(output, "utf8"),
        omitted_bytes: omitted,
        strategy: "head_tail",
      },
    };
  }
}

/**
 * Replaces every line longer than MAX_LINE_BYTES with its first 2032 bytes plus the
 * suffix. Returns `bytes` itself when no line is too long.
 */
function capLines(bytes: Buffer): Buffer {
  if (bytes.length <= MAX_LINE_BYTES) return bytes;
  const parts: Buffer[] = [];
  let changed = false;
  let start = 0;
  while (start < bytes.length) {
    const nl = bytes.indexOf(NEWLINE, start);
    const end = nl === -1 ? bytes.length : nl;
    if (end - start > MAX_LINE_BYTES) {
      parts.push(bytes.subarray(start, start + LINE_KEEP_BYTES), SUFFIX);
      changed = true;
    } else {
      parts.push(bytes.subarray(start, end));
    }
    if (nl === -1) break;
    parts.push(NEWLINE_BYTES);
    start = nl + 1;
  }
  return changed ? Buffer.concat(parts) : bytes;
}
