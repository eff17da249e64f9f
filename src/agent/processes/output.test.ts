import { describe, expect, it } from "vitest";

import {
  HEAD_BYTES,
  LINE_TRUNCATION_SUFFIX,
  MAX_LINE_BYTES,
  OutputBuffer,
  TAIL_BYTES,
} from "./output.ts";

/** `n` bytes of 64-byte lines, each naming its own offset, so every slice is checkable. */
function lines(n: number, tag: string): string {
  let s = "";
  for (let i = 0; s.length < n; i++) s += `${tag}${i}`.padEnd(63, ".") + "\n";
  return s.slice(0, n);
}

function writeInChunks(buf: OutputBuffer, s: string, size: number): void {
  const bytes = Buffer.from(s);
  for (let i = 0; i < bytes.length; i += size) buf.write(bytes.subarray(i, i + size));
}

const marker = (n: number) => `\n\n... [omitted ${n} bytes] ...\n\n`;

describe("OutputBuffer", () => {
  it("renders nothing written as empty output without truncation", () => {
    expect(new OutputBuffer().render()).toStrictEqual({ output: "" });
  });

  it("returns the exact output when at most 32 KiB were written", () => {
    const all = lines(HEAD_BYTES + TAIL_BYTES, "L");
    for (const size of [1, 7, 1000, HEAD_BYTES + 5, all.length]) {
      const buf = new OutputBuffer();
      writeInChunks(buf, all, size);
      expect(buf.render()).toStrictEqual({ output: all });
      expect(buf.totalBytes).toBe(all.length);
    }
  });

  it("keeps head and tail with an omission marker and the exact truncation object", () => {
    const head = lines(HEAD_BYTES, "H");
    const middle = lines(10_000, "M");
    const tail = lines(TAIL_BYTES, "T");
    const output = head + marker(10_000) + tail;
    for (const size of [1, 333, 4096, 40_000]) {
      const buf = new OutputBuffer();
      writeInChunks(buf, head + middle + tail, size);
      expect(buf.render()).toStrictEqual({
        output,
        truncated: {
          original_bytes: HEAD_BYTES + 10_000 + TAIL_BYTES,
          retained_bytes: Buffer.byteLength(output),
          omitted_bytes: 10_000,
          strategy: "head_tail",
        },
      });
    }
  });

  it("drops a single byte past 32 KiB and says so", () => {
    const all = lines(HEAD_BYTES + TAIL_BYTES + 1, "L");
    const buf = new OutputBuffer();
    buf.write(Buffer.from(all));
    const output = all.slice(0, HEAD_BYTES) + marker(1) + all.slice(HEAD_BYTES + 1);
    expect(buf.render().output).toBe(output);
    expect(buf.render().truncated).toStrictEqual({
      original_bytes: all.length,
      retained_bytes: output.length,
      omitted_bytes: 1,
      strategy: "head_tail",
    });
  });

  it("caps a line longer than 2048 bytes in the head to 2032 bytes plus the suffix", () => {
    const buf = new OutputBuffer();
    buf.write(Buffer.from("short\n" + "x".repeat(3000) + "\nafter\n" + "y".repeat(2048)));
    const capped = "x".repeat(2032) + LINE_TRUNCATION_SUFFIX;
    expect(Buffer.byteLength(capped)).toBe(MAX_LINE_BYTES);
    // A line of exactly 2048 bytes is left alone; the cap is not a truncation of the output.
    expect(buf.render()).toStrictEqual({
      output: "short\n" + capped + "\nafter\n" + "y".repeat(2048),
    });
  });

  it("caps a long line in the tail separately from the head", () => {
    const head = lines(HEAD_BYTES, "H");
    const buf = new OutputBuffer();
    buf.write(Buffer.from(head));
    buf.write(Buffer.from("z".repeat(19_999) + "\n"));
    // The ring keeps the last 16384 bytes: 16383 z's and the newline, one 16383-byte line.
    const output = head + marker(3_616) + "z".repeat(2032) + LINE_TRUNCATION_SUFFIX + "\n";
    expect(buf.render()).toStrictEqual({
      output,
      truncated: {
        original_bytes: HEAD_BYTES + 20_000,
        retained_bytes: Buffer.byteLength(output),
        omitted_bytes: 3_616,
        strategy: "head_tail",
      },
    });
  });

  it("caps a line that spans the head's end in the head and in the tail separately", () => {
    const buf = new OutputBuffer();
    buf.write(Buffer.from("a".repeat(HEAD_BYTES + 3000)));
    expect(buf.render()).toStrictEqual({
      output: "a".repeat(2032) + LINE_TRUNCATION_SUFFIX + "a".repeat(2032) + LINE_TRUNCATION_SUFFIX,
    });
  });

  it("decodes UTF-8 at render time, whole characters split across writes", () => {
    const text = "工具-é\n".repeat(3000); // 30000 bytes; crosses the head's end mid-character
    const bytes = Buffer.from(text);
    expect(bytes.length).toBeLessThanOrEqual(HEAD_BYTES + TAIL_BYTES);
    const buf = new OutputBuffer();
    for (let i = 0; i < bytes.length; i += 5) buf.write(bytes.subarray(i, i + 5));
    expect(buf.render()).toStrictEqual({ output: text });
  });
});
