import { chmod, mkdir, writeFile as putFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readFile } from "./index.ts";
import { messageOf, permissionsApply, useTempDir } from "./testing.ts";

describe("read-file", () => {
  const tmp = useTempDir();

  async function fixture(content: string | Buffer = "0123456789"): Promise<string> {
    const path = join(tmp(), "data.bin");
    await putFile(path, content);
    return path;
  }

  it("answers raw bytes as octet stream", async () => {
    const bytes = Buffer.from([0, 255, 10, 13, 0x80]);
    const answer = await readFile({ path: await fixture(bytes) });
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe("application/octet-stream");
    expect(answer.body.equals(bytes)).toBe(true);
  });

  it("offset and limit select a byte range", async () => {
    const path = await fixture();
    expect((await readFile({ path, offset: "3", limit: "4" })).body.toString()).toBe("3456");
    expect((await readFile({ path, offset: "7" })).body.toString()).toBe("789");
    expect((await readFile({ path, limit: "2" })).body.toString()).toBe("01");
    expect((await readFile({ path, offset: "8", limit: "100" })).body.toString()).toBe("89");
  });

  it("limit zero or absent reads to end of file", async () => {
    const path = await fixture();
    expect((await readFile({ path, limit: "0" })).body.toString()).toBe("0123456789");
    expect((await readFile({ path, offset: "", limit: "" })).body.toString()).toBe("0123456789");
  });

  it("offset past the end reads nothing", async () => {
    const answer = await readFile({ path: await fixture(), offset: "50" });
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBe(0);
  });

  it("bad offset or limit is 400 naming the parameter", async () => {
    const path = await fixture();
    for (const [query, name] of [
      [{ path, offset: "-1" }, "offset"],
      [{ path, offset: "1.5" }, "offset"],
      [{ path, limit: "ten" }, "limit"],
      [{ path, limit: "0x10" }, "limit"],
      [{ path, limit: "99999999999999999999" }, "limit"],
    ] as const) {
      const answer = await readFile(query);
      expect(answer.status).toBe(400);
      expect(messageOf(answer)).toContain(`The ${name} query parameter`);
    }
  });

  it("relative or missing path is 400", async () => {
    const relative = await readFile({ path: "data.bin" });
    expect(relative.status).toBe(400);
    expect(messageOf(relative)).toMatch(/must be an absolute path/);
    const missing = await readFile({});
    expect(missing.status).toBe(400);
    expect(messageOf(missing)).toMatch(/is required/);
  });

  it("missing file is 404", async () => {
    const answer = await readFile({ path: join(tmp(), "nope.txt") });
    expect(answer.status).toBe(404);
    expect(messageOf(answer)).toContain("nope.txt");
  });

  it("directory is 400 saying it is a directory", async () => {
    const dir = join(tmp(), "sub");
    await mkdir(dir);
    const answer = await readFile({ path: dir });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/is a directory/);
  });

  it.skipIf(!permissionsApply)("UnreadableFileIs403", async () => {
    const path = await fixture();
    await chmod(path, 0o000);
    expect((await readFile({ path })).status).toBe(403);
  });
});
