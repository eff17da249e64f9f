import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  stat,
  symlink,
  writeFile as putFile,
} from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeAtomically } from "./atomic.ts";
import { parseWritePath, writeFile } from "./index.ts";
import { bodyOf, messageOf, permissionsApply, useTempDir } from "./testing.ts";

describe("write-file", () => {
  const tmp = useTempDir();

  it("creates parent directories and writes the bytes", async () => {
    const path = join(tmp(), "a", "b", "c.txt");
    const answer = await writeFile(path, Buffer.from("hello\n"));
    expect(answer.status).toBe(200);
    expect(bodyOf(answer)).toEqual({ message: `Successfully wrote to "${path}"` });
    expect(await readFile(path, "utf8")).toBe("hello\n");
  });

  it("replacing keeps the existing mode and leaves no temp files", async () => {
    const path = join(tmp(), "run.sh");
    await putFile(path, "old");
    await chmod(path, 0o755);
    expect((await writeFile(path, Buffer.from("#!/bin/sh\n"))).status).toBe(200);
    expect((await stat(path)).mode & 0o7777).toBe(0o755);
    expect(await readFile(path, "utf8")).toBe("#!/bin/sh\n");
    expect(await readdir(tmp())).toEqual(["run.sh"]);
  });

  it("a path whose `..` names a directory once its parents are made is refused before the rename", async () => {
    // `fz/new../..` is `fz` once `new..` exists: the write must see that, not rename onto it
    // (onto a busy directory, such as the agent's own, that rename failed with EBUSY: a 500).
    await mkdir(join(tmp(), "fz"));
    const answer = await writeFile(`${tmp()}/fz/new../..`, Buffer.from("x")); // not join: it normalizes
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/is a directory; write-file only writes files/);
    expect(await readdir(join(tmp(), "fz"))).toEqual(["new.."]);
  });

  it("new file gets mode 644", async () => {
    const path = join(tmp(), "new.txt");
    await writeFile(path, Buffer.from("x"));
    expect((await stat(path)).mode & 0o777).toBe(0o644);
  });

  it("writing through a symlink replaces its target and keeps the link", async () => {
    const target = join(tmp(), "real.txt");
    const link = join(tmp(), "link.txt");
    await putFile(target, "old");
    await symlink(target, link);
    await writeFile(link, Buffer.from("new"));
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(await readFile(target, "utf8")).toBe("new");
  });

  it("relative or missing path is 400 and writes nothing", async () => {
    const relative = await writeFile("rel.txt", Buffer.from("x"));
    expect(relative.status).toBe(400);
    expect(messageOf(relative)).toMatch(/must be an absolute path/);
    expect((await writeFile(undefined, Buffer.from("x"))).status).toBe(400);
    expect((await writeFile("", Buffer.from("x"))).status).toBe(400);
    expect(await readdir(tmp())).toEqual([]);
  });

  it("parse write path refuses a relative path before any write", () => {
    expect(parseWritePath("/abs/x")).toEqual({ ok: true, value: "/abs/x" });
    const refused = parseWritePath("x");
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.answer.status).toBe(400);
  });

  it("a directory target is 400", async () => {
    const dir = join(tmp(), "d");
    await mkdir(dir);
    const answer = await writeFile(dir, Buffer.from("x"));
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/is a directory/);
  });

  it("a file in place of a parent directory is 400", async () => {
    await putFile(join(tmp(), "f"), "x");
    const answer = await writeFile(join(tmp(), "f", "g", "h.txt"), Buffer.from("x"));
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/not a directory/);
  });

  it.skipIf(!permissionsApply)("ReadOnlyDirectoryIs403AndLeavesNoTempFile", async () => {
    const dir = join(tmp(), "ro");
    await mkdir(dir);
    await chmod(dir, 0o555);
    try {
      expect((await writeFile(join(dir, "x.txt"), Buffer.from("x"))).status).toBe(403);
      expect(await readdir(dir)).toEqual([]);
    } finally {
      await chmod(dir, 0o755);
    }
  });

  it("a failed rename removes the temp file and keeps the target", async () => {
    // rename(file, non-empty directory) fails after the temp file was written.
    const target = join(tmp(), "busy");
    await mkdir(target);
    await putFile(join(target, "keep.txt"), "kept");
    await expect(writeAtomically(target, "data", 0o644)).rejects.toThrow();
    expect(await readdir(tmp())).toEqual(["busy"]);
    expect(await readFile(join(target, "keep.txt"), "utf8")).toBe("kept");
  });
});
