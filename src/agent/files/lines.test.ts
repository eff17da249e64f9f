import { mkdir, writeFile as putFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readFileLines } from "./index.ts";
import { cutLine, LINE_TRUNCATION_MARKER, READ_FILE_LINES_LIMITS } from "./lines.ts";
import { bodyOf, useTempDir } from "./testing.ts";

describe("read-file-lines", () => {
  const tmp = useTempDir();

  async function fixture(content: string): Promise<string> {
    const path = join(tmp(), "file.txt");
    await putFile(path, content);
    return path;
  }

  async function read(query: { path?: string; offset?: string; limit?: string }) {
    const answer = await readFileLines(query);
    expect(answer.status).toBe(200);
    return bodyOf(answer);
  }

  it("numbers lines from one joined without trailing newline", async () => {
    const path = await fixture("alpha\nbeta\ngamma\n");
    expect(await read({ path })).toEqual({
      success: true,
      file_size: 17,
      total_lines: 3,
      lines_read: 3,
      content: "1\talpha\n2\tbeta\n3\tgamma",
    });
  });

  it("offset is one based and limit counts lines", async () => {
    const path = await fixture("a\nb\nc\nd\ne");
    const body = await read({ path, offset: "2", limit: "3" });
    expect(body).toMatchObject({ success: true, total_lines: 5, lines_read: 3 });
    expect(body.content).toBe("2\tb\n3\tc\n4\td");
  });

  it("carriage returns of crlf lines are not shown", async () => {
    const body = await read({ path: await fixture("one\r\ntwo\r\n") });
    expect(body.content).toBe("1\tone\n2\ttwo");
  });

  it("empty file is success with no lines", async () => {
    const body = await read({ path: await fixture("") });
    expect(body).toEqual({
      success: true,
      file_size: 0,
      total_lines: 0,
      lines_read: 0,
      content: "",
    });
  });

  it("offset past the end is success false", async () => {
    const body = await read({ path: await fixture("a\nb\n"), offset: "3" });
    expect(body.success).toBe(false);
    expect(body.error).toMatch(/Offset 3 is past the end .* which has 2 lines/);
  });

  it("missing file or directory is success false not an http error", async () => {
    const missing = await read({ path: join(tmp(), "nope.txt") });
    expect(missing.success).toBe(false);
    expect(missing.error).toMatch(/Not found/);
    const dir = join(tmp(), "sub");
    await mkdir(dir);
    const directory = await read({ path: dir });
    expect(directory.success).toBe(false);
    expect(directory.error).toMatch(/is a directory/);
  });

  it("file above max file size is success false", async () => {
    const path = await fixture("x".repeat(READ_FILE_LINES_LIMITS.maxFileSize + 1));
    const body = await read({ path });
    expect(body.success).toBe(false);
    expect(body.error).toMatch(/more than the 1048576 bytes/);
  });

  it("long line is cut to max line bytes with marker", async () => {
    // "é" is 2 bytes and "€" 3, so the cut point falls inside a character at some alignment.
    for (const filler of ["x", "é", "a€", "ab€"]) {
      const long = filler.repeat(2000);
      const body = await read({ path: await fixture(`${long}\nshort\n`) });
      const [first, second] = String(body.content).split("\n");
      const line = (first ?? "").slice("1\t".length);
      expect(Buffer.byteLength(line)).toBeLessThanOrEqual(READ_FILE_LINES_LIMITS.maxLineBytes);
      expect(line.endsWith(LINE_TRUNCATION_MARKER)).toBe(true);
      const kept = line.slice(0, -LINE_TRUNCATION_MARKER.length);
      expect(kept).not.toContain("\uFFFD");
      expect(long.startsWith(kept)).toBe(true);
      expect(Buffer.byteLength(kept)).toBeGreaterThan(1024 - LINE_TRUNCATION_MARKER.length - 3);
      expect(second).toBe("2\tshort");
    }
  });

  it("line that fits is not cut", () => {
    const exact = "y".repeat(1024);
    expect(cutLine(exact)).toBe(exact);
  });

  it("content stops before exceeding max response bytes", async () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `${i}:${"z".repeat(100)}`);
    const body = await read({ path: await fixture(lines.join("\n")), offset: "5" });
    const content = String(body.content);
    expect(body.success).toBe(true);
    expect(Buffer.byteLength(content)).toBeLessThanOrEqual(READ_FILE_LINES_LIMITS.maxResponseBytes);
    const got = content.split("\n");
    expect(body.lines_read).toBe(got.length);
    expect(got.length).toBeLessThan(1000);
    // One more line would not have fit.
    const next = `${Number(body.lines_read) + 5}\t${lines[Number(body.lines_read) + 4]}`;
    expect(Buffer.byteLength(content) + 1 + Buffer.byteLength(next)).toBeGreaterThan(32768);
    expect(got[0]).toBe(`5\t${lines[4]}`);
  });

  it("limit is capped at max response lines", async () => {
    const path = await fixture("l\n".repeat(3000));
    expect((await read({ path })).lines_read).toBe(2000);
    expect((await read({ path, limit: "5000" })).lines_read).toBe(2000);
    expect((await read({ path, offset: "2990" })).lines_read).toBe(11);
  });

  it("bad query syntax is 400", async () => {
    const path = await fixture("a\n");
    expect((await readFileLines({ path: "file.txt" })).status).toBe(400);
    expect((await readFileLines({})).status).toBe(400);
    expect((await readFileLines({ path, offset: "two" })).status).toBe(400);
    expect((await readFileLines({ path, limit: "-3" })).status).toBe(400);
  });
});
