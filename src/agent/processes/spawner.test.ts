import { afterEach, describe, expect, it } from "vitest";
import {
  defaultSpawnerProgram,
  NODE_SPAWNER,
  Spawner,
  type ProcessEvents,
  type SpawnerProgram,
} from "./spawner.ts";
import { alive, until } from "./testing.ts";

const spawners: Spawner[] = [];
afterEach(() => {
  for (const s of spawners.splice(0)) s.close();
});

function collect() {
  const seen: string[] = [];
  let out = "";
  const events: ProcessEvents = {
    data: (c) => (out += Buffer.from(c).toString()),
    exit: (code, signal) => seen.push(`exit ${code} ${signal}`),
    close: () => seen.push("close"),
  };
  return { events, seen, output: () => out };
}

// Both spawners, the C one (built here: the test machines have a C compiler) and the JavaScript
// one it stands in for where none is.
const native = defaultSpawnerProgram();
if (native === NODE_SPAWNER)
  throw new Error("spawner.c did not build: is a C compiler (cc) installed?");
describe.each([
  ["spawner.c", native],
  ["spawner-main.js", NODE_SPAWNER],
] as [string, SpawnerProgram][])("%s", (_, program) => {
  it("events that arrive before listen are replayed in order", async () => {
    const s = new Spawner({ PATH: process.env.PATH }, { program });
    spawners.push(s);
    const r = await s.spawn({ id: "a", command: "echo hi; exit 3", cwd: "/", env: {} });
    if (!r.ok) throw new Error(r.detail);
    // Let every message of the short-lived process land before anyone listens.
    await new Promise((done) => setTimeout(done, 200));
    const c = collect();
    r.process.listen(c.events);
    expect(c.seen).toEqual(["exit 3 null", "close"]);
    expect(c.output()).toBe("hi\n");
  });

  it("output that ends after the shell's exit closes after it, with every byte", async () => {
    const s = new Spawner({ PATH: process.env.PATH }, { program });
    spawners.push(s);
    const r = await s.spawn({
      id: "a",
      command: "(sleep 0.2; echo late) & echo early",
      cwd: "/",
      env: {},
    });
    if (!r.ok) throw new Error(r.detail);
    const c = collect();
    r.process.listen(c.events);
    await until(() => c.seen.includes("close"));
    expect(c.seen).toEqual(["exit 0 null", "close"]);
    expect(c.output()).toBe("early\nlate\n");
  });

  it("the base environment comes from the agent and the request adds to it", async () => {
    const s = new Spawner({ PATH: process.env.PATH, BASE: "b" }, { program });
    spawners.push(s);
    const r = await s.spawn({
      id: "a",
      command: 'echo "$BASE $EXTRA"',
      cwd: "/",
      env: { EXTRA: "e" },
    });
    if (!r.ok) throw new Error(r.detail);
    const c = collect();
    r.process.listen(c.events);
    await until(() => c.seen.includes("close"));
    expect(c.output()).toBe("b e\n");
  });

  it("a spawner that dies kills its processes' groups and ends them as killed; the next spawn works", async () => {
    const s = new Spawner({ PATH: process.env.PATH }, { program });
    spawners.push(s);
    const r = await s.spawn({ id: "a", command: "exec sleep 100", cwd: "/", env: {} });
    if (!r.ok) throw new Error(r.detail);
    const c = collect();
    r.process.listen(c.events);
    process.kill(s.pid!, "SIGKILL");
    await until(() => c.seen.includes("close"));
    expect(c.seen).toEqual(["exit null SIGKILL", "close"]);
    await until(() => !alive(r.process.pid));
    const next = await s.spawn({ id: "b", command: "true", cwd: "/", env: {} });
    expect(next.ok).toBe(true);
  });

  it("a failed spawn says why", async () => {
    const s = new Spawner({ PATH: process.env.PATH }, { program });
    spawners.push(s);
    const r = await s.spawn({ id: "a", command: "true", cwd: "/nonexistent-dir", env: {} });
    expect(r).toMatchObject({ ok: false, detail: expect.stringMatching(/ENOENT/) });
  });
});

describe("the spawner's stream", () => {
  it("a spawner that writes something other than frames is stopped, and what waited on it fails", async () => {
    // Four bytes that say a frame of 1 byte, shorter than any frame's type and handle.
    const s = new Spawner(
      { PATH: process.env.PATH },
      { program: ["sh", "-c", "printf '\\001\\000\\000\\000x'; exec sleep 100"] },
    );
    spawners.push(s);
    const r = await s.spawn({ id: "a", command: "true", cwd: "/", env: {} });
    expect(r).toEqual({ ok: false, detail: "The process spawner exited." });
  });
});
