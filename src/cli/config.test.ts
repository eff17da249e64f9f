import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { savedFor, saveFirstUser } from "./config.ts";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe("the CLI's saved tokens", () => {
  it("a token is kept for its server's origin and given to that server only", () => {
    const text = "http://127.0.0.1:3000 tok_local\nhttps://tether.example.com tok_team\n";
    expect(savedFor(text, "http://127.0.0.1:3000")).toBe("tok_local");
    expect(savedFor(text, "https://tether.example.com")).toBe("tok_team");
    expect(savedFor(text, "https://evil.example")).toBeUndefined();
    expect(savedFor(text, "http://127.0.0.1:3001")).toBeUndefined();
    expect(savedFor("", "http://127.0.0.1:3000")).toBeUndefined();
  });

  it("an earlier version's token alone serves a loopback server only", () => {
    for (const local of ["http://127.0.0.1:3000", "http://localhost:8080", "http://[::1]:3000"])
      expect(savedFor("tok_old\n", local), local).toBe("tok_old");
    for (const remote of ["https://tether.example.com", "http://10.0.0.5:3000"])
      expect(savedFor("tok_old\n", remote), remote).toBeUndefined();
    // A line for the server wins over the old one.
    expect(savedFor("tok_old\nhttp://127.0.0.1:3000 tok_new\n", "http://127.0.0.1:3000")).toBe(
      "tok_new",
    );
  });

  it("a second server's first user is saved beside the first's, each file 0600", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-config-"));
    dirs.push(dir);
    const tokens = path.join(dir, "tether", "cli-token");
    const passwords = path.join(dir, "tether", "initial-password");
    const said = await saveFirstUser("http://127.0.0.1:3000/", tokens, "tok_a", "pw_a");
    expect(said).toContain(tokens);
    expect(said).not.toContain("pw_a");
    await saveFirstUser("https://tether.example.com/base", tokens, "tok_b", "pw_b");
    await saveFirstUser("http://127.0.0.1:3000", tokens, "tok_a2", "pw_a2"); // made again
    const text = await readFile(tokens, "utf8");
    expect(savedFor(text, "http://127.0.0.1:3000")).toBe("tok_a2");
    expect(savedFor(text, "https://tether.example.com")).toBe("tok_b");
    expect(text.trim().split("\n")).toHaveLength(2);
    expect(savedFor(await readFile(passwords, "utf8"), "https://tether.example.com")).toBe("pw_b");
    for (const f of [tokens, passwords]) expect((await stat(f)).mode & 0o777).toBe(0o600);
  });
});
