import { mkdir, symlink, writeFile as putFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { listDirectory } from "./index.ts";
import { bodyOf, messageOf, useTempDir } from "./testing.ts";

describe("list-directory", () => {
  const tmp = useTempDir();

  async function populate(dir: string): Promise<void> {
    await mkdir(join(dir, "sub"));
    await putFile(join(dir, "b.txt"), "b");
    await putFile(join(dir, "A.txt"), "a");
    await symlink(join(dir, "sub"), join(dir, "to-sub"));
    await symlink(join(dir, "gone"), join(dir, "broken"));
  }

  it("root relativity joins components to slash and sorts by name", async () => {
    const dir = tmp();
    await populate(dir);
    const components = dir.split("/").filter((c) => c !== "");
    const answer = await listDirectory({ path: components, relativity: "root" });
    expect(answer.status).toBe(200);
    expect(bodyOf(answer)).toEqual({
      absolute_path: components,
      absolute_path_string: dir,
      contents: [
        { name: "A.txt", absolute_path_string: join(dir, "A.txt"), is_dir: false },
        { name: "b.txt", absolute_path_string: join(dir, "b.txt"), is_dir: false },
        { name: "broken", absolute_path_string: join(dir, "broken"), is_dir: false },
        { name: "sub", absolute_path_string: join(dir, "sub"), is_dir: true },
        { name: "to-sub", absolute_path_string: join(dir, "to-sub"), is_dir: true },
      ],
    });
  });

  it("home relativity joins components to the home directory", async () => {
    const home = tmp();
    await populate(home);
    await putFile(join(home, "sub", "inner.txt"), "x");
    const answer = await listDirectory({ path: ["sub"], relativity: "home" }, home);
    expect(bodyOf(answer)).toMatchObject({
      absolute_path_string: join(home, "sub"),
      contents: [{ name: "inner.txt", absolute_path_string: join(home, "sub", "inner.txt") }],
    });
    const top = bodyOf(await listDirectory({ path: [], relativity: "home" }, home));
    expect(top.absolute_path_string).toBe(home);
  });

  it("root with no components is slash", async () => {
    const body = bodyOf(await listDirectory({ path: [], relativity: "root" }));
    expect(body.absolute_path).toEqual([]);
    expect(body.absolute_path_string).toBe("/");
  });

  it("missing directory is 404", async () => {
    const answer = await listDirectory({ path: ["nope"], relativity: "home" }, tmp());
    expect(answer.status).toBe(404);
  });

  it("a file is 400 not a directory", async () => {
    await putFile(join(tmp(), "f.txt"), "x");
    const answer = await listDirectory({ path: ["f.txt"], relativity: "home" }, tmp());
    expect(answer.status).toBe(400);
    expect(messageOf(answer)).toMatch(/is not a directory/);
  });

  it("body that fails the schema is 400 naming the field", async () => {
    const relative = await listDirectory({ path: ["x"], relativity: "cwd" });
    expect(relative.status).toBe(400);
    expect(messageOf(relative)).toMatch(/relativity/);
    const notArray = await listDirectory({ path: "/tmp", relativity: "root" });
    expect(notArray.status).toBe(400);
    expect(messageOf(notArray)).toMatch(/^The list-directory request body is invalid: path:/);
  });
});
