import { randomBytes } from "node:crypto";
import { lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseSecretKey } from "../chatd/secrets/index.ts";
import {
  checkDataDirOutsideWorkspace,
  defaultDataDir,
  loadSecretKeys,
  prepareDataDir,
  ServerConfigError,
} from "./server-state.ts";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), "tether-state-"));
  dirs.push(d);
  return d;
}

describe("where the server keeps its state", () => {
  it("the default data dir is $XDG_DATA_HOME/tether, else ~/.local/share/tether, never the current directory", () => {
    expect(defaultDataDir({ HOME: "/home/u", XDG_DATA_HOME: "/xdg" })).toBe("/xdg/tether");
    expect(defaultDataDir({ HOME: "/home/u" })).toBe("/home/u/.local/share/tether");
    // A relative XDG_DATA_HOME is invalid by the spec and ignored.
    expect(defaultDataDir({ HOME: "/home/u", XDG_DATA_HOME: "rel" })).toBe(
      "/home/u/.local/share/tether",
    );
  });

  it("a data dir inside the workspace is refused, the same dir, through a symlink, and the reverse", async () => {
    const ws = await tempDir();
    const other = await tempDir();
    await mkdir(path.join(ws, "sub"));
    await symlink(path.join(ws, "sub"), path.join(other, "link"));
    await symlink(ws, path.join(other, "ws-link"));
    const refused: [string, string][] = [
      [path.join(ws, ".tether"), ws],
      [ws, ws],
      [path.join(other, "link", "not", "yet", "made"), ws],
      [path.join(other, "data"), path.join(other, "data", "ws")],
      [path.join(ws, "sub", "data"), path.join(other, "ws-link")],
    ];
    for (const [data, workspace] of refused) {
      await expect(checkDataDirOutsideWorkspace(data, workspace), data).rejects.toThrow(
        ServerConfigError,
      );
    }
    await expect(
      checkDataDirOutsideWorkspace(path.join(other, "data"), ws),
    ).resolves.toBeUndefined();
    // A sibling whose name starts the same is outside.
    await expect(checkDataDirOutsideWorkspace(`${ws}-data`, ws)).resolves.toBeUndefined();
  });

  it("the data dir is made 0700 and what an older version left in it restricted to 0700/0600", async () => {
    const root = await tempDir();
    const data = path.join(root, "data");
    await mkdir(path.join(data, "db", "base"), { recursive: true, mode: 0o755 });
    await writeFile(path.join(data, "db", "base", "1"), "x", { mode: 0o666 });
    await writeFile(path.join(data, "cli-token"), "x", { mode: 0o644 });
    await prepareDataDir(data);
    for (const p of ["", "db", "db/base"])
      expect((await stat(path.join(data, p))).mode & 0o777, p).toBe(0o700);
    for (const p of ["db/base/1", "cli-token"])
      expect((await lstat(path.join(data, p))).mode & 0o777, p).toBe(0o600);
    const fresh = path.join(root, "fresh", "data");
    await prepareDataDir(fresh);
    expect((await stat(fresh)).mode & 0o777).toBe(0o700);
  });
});

describe("the secret key", () => {
  it("the embedded setup makes <data-dir>/secret.key (0600) once and keeps using it", async () => {
    const data = await tempDir();
    const first = await loadSecretKeys({ embeddedDataDir: data });
    const file = path.join(data, "secret.key");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(parseSecretKey(await readFile(file, "utf8"), "file")).toEqual(first.current);
    expect((await loadSecretKeys({ embeddedDataDir: data })).current).toEqual(first.current);
  });

  it("Postgres without a key refuses to start, saying how to make one", async () => {
    const err = await loadSecretKeys({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerConfigError);
    expect((err as Error).message).toContain("openssl rand -base64 32");
    expect((err as Error).message).toContain("--secret-key-file");
    expect((err as Error).message).toContain("TETHER_SECRET_KEY");
  });

  it("a key comes from TETHER_SECRET_KEY or a file; old keys from TETHER_SECRET_KEY_OLD or a file", async () => {
    const dir = await tempDir();
    const [a, b, c] = [0, 1, 2].map(() => randomBytes(32));
    const file = path.join(dir, "k");
    await writeFile(file, a!.toString("hex") + "\n");
    const oldFile = path.join(dir, "old");
    await writeFile(oldFile, c!.toString("base64"));
    expect(await loadSecretKeys({ keyFile: file })).toEqual({ current: a, old: [] });
    expect(
      await loadSecretKeys({
        key: b!.toString("base64"),
        oldKeys: `${a!.toString("base64")}, ${c!.toString("hex")}`,
      }),
    ).toEqual({ current: b, old: [a, c] });
    expect(await loadSecretKeys({ key: b!.toString("base64"), oldKeyFile: oldFile })).toEqual({
      current: b,
      old: [c],
    });
    await expect(loadSecretKeys({ key: "x", keyFile: file })).rejects.toThrow(/not both/);
    await expect(loadSecretKeys({ key: "too short" })).rejects.toThrow(ServerConfigError);
    await expect(loadSecretKeys({ keyFile: path.join(dir, "missing") })).rejects.toThrow(
      ServerConfigError,
    );
  });

  it("a key given after the embedded setup made its own re-seals what the made one sealed", async () => {
    const data = await tempDir();
    const made = (await loadSecretKeys({ embeddedDataDir: data })).current;
    const given = randomBytes(32);
    expect(await loadSecretKeys({ key: given.toString("base64"), embeddedDataDir: data })).toEqual({
      current: given,
      old: [made],
    });
  });
});
