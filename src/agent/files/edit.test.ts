import { chmod, readdir, readFile, stat, symlink, writeFile as putFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyEdits, editFiles, parseEditFilesRequest } from "./index.ts";
import { bodyOf, messageOf, useTempDir } from "./testing.ts";

describe("edit-files", () => {
  const tmp = useTempDir();

  async function fixture(name: string, content: string): Promise<string> {
    const path = join(tmp(), name);
    await putFile(path, content);
    return path;
  }

  const text = (path: string) => readFile(path, "utf8");
  const edit = (old_text: string, new_text: string, replace_all?: boolean) =>
    replace_all === undefined ? { old_text, new_text } : { old_text, new_text, replace_all };

  it("exact match is replaced and the answer is empty", async () => {
    const path = await fixture("a.ts", "const a = 1;\nconst b = 2;\n");
    const answer = await editFiles({ files: [{ path, edits: [edit("b = 2", "b = 3")] }] });
    expect(answer.status).toBe(200);
    expect(bodyOf(answer)).toEqual({});
    expect(await text(path)).toBe("const a = 1;\nconst b = 3;\n");
  });

  it("second pass matches whole lines ignoring trailing whitespace", async () => {
    const path = await fixture("a.txt", "keep\nfoo  \nbar\t\nend\n");
    const answer = await editFiles({ files: [{ path, edits: [edit("foo\nbar", "FOO\nBAR")] }] });
    expect(answer.status).toBe(200);
    expect(await text(path)).toBe("keep\nFOO\nBAR\nend\n");
  });

  it("second pass keeps crlf line endings", async () => {
    const path = await fixture("win.txt", "one\r\ntwo\r\nthree\r\n");
    await editFiles({ files: [{ path, edits: [edit("one\ntwo\n", "uno\ndos\n")] }] });
    expect(await text(path)).toBe("uno\r\ndos\r\nthree\r\n");
  });

  it("third pass matches whole lines ignoring leading and trailing whitespace", async () => {
    const path = await fixture("b.ts", "function f() {\n  if (x) {\n    y();\n  }\n}\n");
    const answer = await editFiles({
      files: [{ path, edits: [edit("if (x) {\ny();\n}", "  if (z) {\n    w();\n  }")] }],
    });
    expect(answer.status).toBe(200);
    expect(await text(path)).toBe("function f() {\n  if (z) {\n    w();\n  }\n}\n");
  });

  it("ambiguous match is 400 naming the count and nothing is written", async () => {
    const content = "x = 1;\nx = 1;\nx = 1;\n";
    const path = await fixture("c.ts", content);
    const answer = await editFiles({ files: [{ path, edits: [edit("x = 1;", "x = 2;")] }] });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toBe(
      `old_text matches 3 places in ${path} (file 1, edit 1). ` +
        "Add surrounding lines to make it unique, or set replace_all to change every match.",
    );
    expect(await text(path)).toBe(content);
  });

  it("replace all replaces every match", async () => {
    const path = await fixture("c.ts", "x = 1;\ny;\nx = 1;\n");
    const answer = await editFiles({ files: [{ path, edits: [edit("x = 1;", "x = 2;", true)] }] });
    expect(answer.status).toBe(200);
    expect(await text(path)).toBe("x = 2;\ny;\nx = 2;\n");
  });

  it("not found is 400 naming file and edit and how to fix it", async () => {
    const path = await fixture("d.ts", "alpha\nbeta\n");
    const answer = await editFiles({
      files: [{ path, edits: [edit("alpha", "ALPHA"), edit("gamma", "GAMMA")] }],
    });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toBe(
      `old_text was not found in ${path} (file 1, edit 2). Read the file again and copy the text exactly.`,
    );
    expect(bodyOf(answer).detail).toMatch(/apply in order/);
    expect(await text(path)).toBe("alpha\nbeta\n");
  });

  it("edits of one file apply in order each to the previous result", async () => {
    const path = await fixture("e.txt", "one\n");
    const answer = await editFiles({
      files: [{ path, edits: [edit("one", "two"), edit("two", "three")] }],
    });
    expect(answer.status).toBe(200);
    expect(await text(path)).toBe("three\n");
  });

  it("validation failure in the second file leaves the first byte identical", async () => {
    const first = await fixture("first.txt", "keep me\r\nexactly \n");
    const before = await readFile(first);
    const second = await fixture("second.txt", "hello\n");
    const answer = await editFiles({
      files: [
        { path: first, edits: [edit("keep me", "changed")] },
        { path: second, edits: [edit("absent", "x")] },
      ],
    });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toContain(`${second} (file 2, edit 1)`);
    expect((await readFile(first)).equals(before)).toBe(true);
    expect(await text(second)).toBe("hello\n");
  });

  it("missing file is 404 and no other file is written", async () => {
    const first = await fixture("first.txt", "a\n");
    const missing = join(tmp(), "missing.txt");
    const answer = await editFiles({
      files: [
        { path: first, edits: [edit("a", "b")] },
        { path: missing, edits: [edit("a", "b")] },
      ],
    });
    expect(answer.status).toBe(404);
    expect(messageOf(answer)).toContain(`${missing} (file 2) does not exist`);
    expect(await text(first)).toBe("a\n");
  });

  it("duplicate path is 400 even when spelled differently or through a symlink", async () => {
    const path = await fixture("f.txt", "a b\n");
    const respelled = await editFiles({
      files: [
        { path, edits: [edit("a", "A")] },
        { path: `${tmp()}/./f.txt`, edits: [edit("b", "B")] },
      ],
    });
    expect(respelled.status).toBe(400);
    expect(messageOf(respelled)).toMatch(/File 2 repeats the path .* of file 1/);
    const link = join(tmp(), "link.txt");
    await symlink(path, link);
    const aliased = await editFiles({
      files: [
        { path, edits: [edit("a", "A")] },
        { path: link, edits: [edit("b", "B")] },
      ],
    });
    expect(aliased.status).toBe(400);
    expect(messageOf(aliased)).toMatch(/is the same file as file 1/);
    expect(await text(path)).toBe("a b\n");
  });

  it("empty old text is 400 naming the edit", async () => {
    const path = await fixture("g.txt", "a\n");
    const answer = await editFiles({ files: [{ path, edits: [edit("a", "b"), edit("", "x")] }] });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toContain("old_text is empty in");
    expect(messageOf(answer)).toContain("(file 1, edit 2)");
    expect(await text(path)).toBe("a\n");
  });

  it("no files no edits relative path and schema failures are 400", async () => {
    const cases: [unknown, RegExp][] = [
      [{ files: [] }, /No files to edit/],
      [{ files: [{ path: join(tmp(), "x"), edits: [] }] }, /has no edits/],
      [{ files: [{ path: "rel.txt", edits: [edit("a", "b")] }] }, /file 1 must be an absolute/],
      [{ files: [{ path: "", edits: [edit("a", "b")] }] }, /The path of file 1 is required/],
      [{ files: [{ edits: [edit("a", "b")] }] }, /files\[0\]\.path/],
      [{ files: [{ path: "/x", edits: [{ old_text: "a" }] }] }, /files\[0\]\.edits\[0\]\.new_text/],
      [null, /body:/],
    ];
    for (const [body, message] of cases) {
      const answer = await editFiles(body);
      expect(answer.status).toBe(400);
      expect(messageOf(answer)).toMatch(message);
    }
  });

  it("an edited file keeps its mode and no temp file is left", async () => {
    const path = await fixture("tool.sh", "echo hi\n");
    await chmod(path, 0o755);
    expect((await editFiles({ files: [{ path, edits: [edit("hi", "bye")] }] })).status).toBe(200);
    expect((await stat(path)).mode & 0o7777).toBe(0o755);
    expect(await readdir(tmp())).toEqual(["tool.sh"]);
  });

  it("include diff answers a unified diff per file", async () => {
    const path = await fixture("h.txt", "a\nb\nc\n");
    const answer = await editFiles({
      files: [{ path, edits: [edit("b", "B")] }],
      include_diff: true,
    });
    expect(bodyOf(answer)).toEqual({
      files: [{ path, diff: `--- ${path}\n+++ ${path}\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n` }],
    });
  });

  it("non utf 8 file is refused and kept", async () => {
    const path = join(tmp(), "bin.dat");
    const bytes = Buffer.from([0x61, 0xff, 0x62, 0x0a]);
    await putFile(path, bytes);
    const answer = await editFiles({ files: [{ path, edits: [edit("a", "c")] }] });
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/not valid UTF-8/);
    expect((await readFile(path)).equals(bytes)).toBe(true);
  });

  it("parse edit files request refuses bad input without touching files", async () => {
    const path = await fixture("i.txt", "a\n");
    const bad = parseEditFilesRequest(Buffer.from("{not json"));
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(messageOf(bad.answer)).toBe("Request body must be valid JSON.");
    const good = parseEditFilesRequest(
      Buffer.from(JSON.stringify({ files: [{ path, edits: [edit("a", "z")] }] })),
    );
    expect(good.ok).toBe(true);
    expect(await text(path)).toBe("a\n");
    if (good.ok) expect((await applyEdits(good.value)).status).toBe(200);
    expect(await text(path)).toBe("z\n");
  });
});
