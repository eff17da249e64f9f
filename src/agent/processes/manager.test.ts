import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ManualClock, realClock, type Clock } from "../../contract/clock.ts";
import { LIST_MAX, OUTPUT_WAIT_MAX_MS, ProcessManager, REAP_AFTER_MS } from "./manager.ts";
import {
  alive,
  killGroups,
  livingMembers,
  rememberChildGroups,
  rememberGroup,
  until,
} from "./testing.ts";

let dir: string;
let managers: ProcessManager[] = [];
/** The clock of each manager, so a start's instant defaults to "now". */
const clocks = new WeakMap<ProcessManager, Clock>();

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "tether-proc-"));
});

afterEach(async () => {
  // closeAll is the code under test: bound it in real time, then sweep whatever survived.
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise((r) => (timer = setTimeout(r, 3_000)));
  await Promise.race([Promise.all(managers.map((m) => m.closeAll())), bound]);
  clearTimeout(timer);
  killGroups();
  managers = [];
  rmSync(dir, { recursive: true, force: true });
});

function manager(clock: Clock = new ManualClock(), exitGraceMs?: number): ProcessManager {
  const m = new ProcessManager({
    clock,
    defaultDir: dir,
    env: { PATH: process.env.PATH },
    exitGraceMs,
  });
  managers.push(m);
  clocks.set(m, clock);
  return m;
}

/** Every wait in a test gives up after 5 s, so a bug fails the test instead of hanging it. */
const bounded = () => AbortSignal.timeout(5_000);

async function start(
  m: ProcessManager,
  id: string,
  command: string,
  o: { chatId?: string; startedAt?: number } = {},
): Promise<void> {
  const res = await m.start({
    id,
    command,
    chatId: o.chatId,
    startedAt: o.startedAt ?? clocks.get(m)?.now() ?? 0,
  });
  rememberChildGroups(); // a shell that dies early may leave its group behind
  expect(res).toStrictEqual({ ok: true, id });
}

/** Output of `id` once it contains a line; the first line is taken as the shell's pid. */
async function shellPid(m: ProcessManager, id: string): Promise<number> {
  let out = "";
  await until(async () => {
    out = (await m.output(id, undefined, { wait: false, signal: bounded() }))?.output ?? "";
    return out.includes("\n");
  });
  const pid = Number(out.split("\n")[0]);
  rememberGroup(pid);
  return pid;
}

const output = (m: ProcessManager, id: string, chatId?: string) =>
  m.output(id, chatId, { wait: false, signal: bounded() });

describe("exit", () => {
  it("wait=true returns on exit with the exit status of a normal exit", async () => {
    const m = manager();
    await start(m, "p", "echo hello; echo oops >&2; exit 3");
    expect(await m.output("p", undefined, { wait: true, signal: bounded() })).toStrictEqual({
      output: "hello\noops\n",
      running: false,
      exit_code: 3,
      command: "echo hello; echo oops >&2; exit 3",
    });
  });

  it("exit_code is −1 when a signal ended the process", async () => {
    const m = manager();
    await start(m, "p", "sleep 100");
    expect(m.signal("p", undefined, "terminate")).toBe("ok");
    const res = await m.output("p", undefined, { wait: true, signal: bounded() });
    expect(res).toMatchObject({ running: false, exit_code: -1 });
    expect(m.signal("p", undefined, "kill")).toBe("not_running");
    expect(m.signal("nope", undefined, "kill")).toBe("not_found");
  });

  it("wait=true gives up after OUTPUT_WAIT_MAX_MS on the clock, or when its signal aborts", async () => {
    const clock = new ManualClock();
    const m = manager(clock);
    await start(m, "p", "sleep 100");
    let done = false;
    const waiting = m.output("p", undefined, { wait: true, signal: bounded() }).then((r) => {
      done = true;
      return r;
    });
    clock.advance(OUTPUT_WAIT_MAX_MS - 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);
    clock.advance(1);
    expect(await waiting).toMatchObject({ running: true, output: "" });
    expect(await waiting).not.toHaveProperty("exit_code");

    const ac = new AbortController();
    const aborted = m.output("p", undefined, { wait: true, signal: ac.signal });
    ac.abort();
    expect(await aborted).toMatchObject({ running: true });
  });

  it("a background child holding the pipes counts as exited once exitGraceMs passed after the shell exited", async () => {
    const clock = new ManualClock();
    const m = manager(clock, 250);
    await start(m, "p", "echo $$; sleep 5 & exit 3");
    const pid = await shellPid(m, "p");
    await until(() => !alive(pid)); // the shell is reaped; `sleep 5` still holds the pipes
    expect(livingMembers(pid)).toHaveLength(1);
    expect(await output(m, "p")).toMatchObject({ running: true });
    clock.advance(249);
    expect(await output(m, "p")).toMatchObject({ running: true });
    clock.advance(1);
    // The spawner relays what the pipes still hold, then the exit is recorded.
    await until(async () => (await output(m, "p"))?.running === false);
    expect(await output(m, "p")).toStrictEqual({
      output: `${pid}\n`,
      running: false,
      exit_code: 3,
      command: "echo $$; sleep 5 & exit 3",
    });
  });
});

describe("output at the exit", () => {
  /** Blocks this event loop (the agent's) for `ms` of real time, as a busy agent does. */
  const block = (ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // busy: nothing the spawner relays is read meanwhile
    }
  };
  const SEQ = Array.from({ length: 5_500 }, (_, i) => `${i + 1}\n`).join(""); // 26,393 bytes

  it("every byte a command wrote before it exited is in its output, even when its exit is relayed first", async () => {
    // The agent reads a shell's exit, and its grace has passed before it reads anything more
    // (a busy agent): the clock fires a 0 ms grace at once. While this loop is blocked, a noisy
    // process fills the spawner's channel, so the spawner holds back the targets' output
    // (backpressure) and relays their exits before their last bytes.
    const clock: Clock = {
      now: () => realClock.now(),
      setTimer: (ms, fn) => {
        if (ms > 0) return realClock.setTimer(ms, fn);
        fn();
        return { cancel: () => undefined };
      },
    };
    const m = manager(clock, 0);
    await start(m, "noise", "yes 0123456789abcdef0123456789abcdef");
    const ids = ["a", "b", "c", "d"];
    for (const id of ids) await start(m, id, "sleep 0.3; seq 1 2000; sleep 0.2; seq 2001 5500");
    block(1_500);
    for (const id of ids) {
      const out = await m.output(id, undefined, { wait: true, signal: bounded() });
      expect(out).toMatchObject({ running: false, exit_code: 0 });
      expect(out?.truncated).toBeUndefined();
      expect(Buffer.byteLength(out!.output)).toBe(Buffer.byteLength(SEQ));
      expect(out?.output).toBe(SEQ);
    }
    expect(m.signal("noise", undefined, "kill")).toBe("ok");
  });
});

describe("stopToolCallProcess", () => {
  it("a stop kills grandchildren too: the whole group is gone", async () => {
    const m = manager();
    await start(m, "p", "echo $$; sleep 100 & sleep 100");
    const pgid = await shellPid(m, "p");
    await until(() => livingMembers(pgid).length >= 2);
    const res = await m.stopToolCallProcess("p", 1_000, bounded());
    expect(res).toMatchObject({ running: false, canceled: true, exit_code: -1 });
    await until(() => livingMembers(pgid).length === 0, 2_000);
  });

  it("stop below the threshold kills and reports canceled with the partial output", async () => {
    const clock = new ManualClock();
    const m = manager(clock);
    await start(m, "p", "echo started; sleep 100");
    await until(async () => (await output(m, "p"))?.output === "started\n");
    clock.advance(1_000);
    const res = await m.stopToolCallProcess("p", 1_001, bounded());
    expect(res).toStrictEqual({
      running: false,
      canceled: true,
      output: "started\n",
      exit_code: -1,
      run_age_ms: 1_000,
    });
  });

  it("canceled stays true on every later stop, whatever its threshold", async () => {
    const clock = new ManualClock();
    const m = manager(clock);
    await start(m, "p", "sleep 100");
    expect(await m.stopToolCallProcess("p", 10, bounded())).toMatchObject({ canceled: true });
    clock.advance(50);
    for (const threshold of [0, 10, 1_000_000]) {
      expect(await m.stopToolCallProcess("p", threshold, bounded())).toStrictEqual({
        running: false,
        canceled: true,
        output: "",
        exit_code: -1,
        run_age_ms: 50,
      });
    }
  });

  it("at or above the threshold, at 0 and at a negative threshold the process is left running", async () => {
    const clock = new ManualClock();
    const m = manager(clock);
    await start(m, "p", "sleep 100");
    clock.advance(1_000);
    for (const threshold of [1_000, 999, 0, -5]) {
      expect(await m.stopToolCallProcess("p", threshold, bounded())).toStrictEqual({
        running: true,
        canceled: false,
        output: "",
        run_age_ms: 1_000,
      });
    }
    clock.advance(1_000); // run age 2000: a threshold 0 still never stops
    expect(await m.stopToolCallProcess("p", 0, bounded())).toMatchObject({ running: true });
  });

  it("a kill through signal() is not canceled", async () => {
    const m = manager();
    await start(m, "p", "sleep 100");
    expect(m.signal("p", undefined, "kill")).toBe("ok");
    await m.output("p", undefined, { wait: true, signal: bounded() });
    expect(await m.stopToolCallProcess("p", 1_000_000, bounded())).toMatchObject({
      running: false,
      canceled: false,
      exit_code: -1,
    });
  });

  it("an exited process reports its exit code and is not canceled", async () => {
    const m = manager();
    await start(m, "p", "printf done; exit 7");
    await m.output("p", undefined, { wait: true, signal: bounded() });
    expect(await m.stopToolCallProcess("p", 1_000_000, bounded())).toStrictEqual({
      running: false,
      canceled: false,
      output: "done",
      exit_code: 7,
      run_age_ms: 0,
    });
  });

  it("stop of an unknown id answers undefined", async () => {
    expect(await manager().stopToolCallProcess("nope", 1_000, bounded())).toBeUndefined();
  });
});

describe("list", () => {
  it("shows running first, then newest first, at most LIST_MAX", async () => {
    const m = manager();
    await start(m, "running-oldest", "sleep 100", { startedAt: 0 });
    for (let i = 1; i <= 11; i++) await start(m, `done-${i}`, "true", { startedAt: i });
    for (let i = 1; i <= 11; i++)
      await m.output(`done-${i}`, undefined, { wait: true, signal: bounded() });
    const list = m.list(undefined, () => false);
    expect(list).toHaveLength(LIST_MAX);
    expect(list.map((p) => p.id)).toStrictEqual([
      "running-oldest",
      ...[11, 10, 9, 8, 7, 6, 5, 4, 3].map((i) => `done-${i}`),
    ]);
    expect(list[0]).toMatchObject({
      command: "sleep 100",
      workdir: dir,
      background: false,
      running: true,
    });
    expect(list[0]).not.toHaveProperty("exit_code");
    expect(list[1]).toMatchObject({ running: false, exit_code: 0 });
    expect(typeof list[1]?.exited_at_unix).toBe("number");
  });

  it("reaps processes that exited more than REAP_AFTER_MS ago, except a current one", async () => {
    const clock = new ManualClock();
    const m = manager(clock);
    for (const id of ["old", "current"]) {
      await start(m, id, "true");
      await m.output(id, undefined, { wait: true, signal: bounded() });
    }
    clock.advance(REAP_AFTER_MS);
    await start(m, "fresh", "true");
    await m.output("fresh", undefined, { wait: true, signal: bounded() });
    expect(m.list(undefined, () => false)).toHaveLength(3); // exactly 5 minutes: kept
    clock.advance(1);
    const list = m.list(undefined, (id) => id === "current");
    expect(list.map((p) => p.id).sort()).toStrictEqual(["current", "fresh"]);
    expect(await output(m, "old")).toBeUndefined();
  });
});

describe("chat isolation", () => {
  it("another chat cannot read, list or signal a process; a list without a chat shows only chatless ones", async () => {
    const m = manager();
    await start(m, "a", "echo $CODER_CHAT_ID; sleep 100", { chatId: "chat-a" });
    await start(m, "b", 'echo "[$CODER_CHAT_ID]"; sleep 100');
    await until(async () => (await output(m, "a"))?.output === "chat-a\n");
    await until(async () => (await output(m, "b"))?.output === "[]\n");
    expect(await output(m, "a", "chat-b")).toBeUndefined();
    expect(await m.output("a", "chat-b", { wait: true, signal: bounded() })).toBeUndefined();
    expect(await output(m, "b", "chat-a")).toBeUndefined(); // a chat never sees chatless ones
    expect(m.signal("a", "chat-b", "kill")).toBe("not_found");
    expect(m.list("chat-b", () => false)).toStrictEqual([]);
    expect(m.list("chat-a", () => false).map((p) => p.id)).toStrictEqual(["a"]);
    // Without a chat, a list shows only the processes started without one (issue 11).
    expect(m.list(undefined, () => false).map((p) => p.id)).toStrictEqual(["b"]);
    expect(
      m
        .all()
        .map((p) => p.id)
        .sort(),
    ).toStrictEqual(["a", "b"]);
    expect(await output(m, "a", "chat-a")).toMatchObject({ running: true });
    expect(m.signal("a", "chat-a", "kill")).toBe("ok");
  });
});

describe("start", () => {
  it("env entries override the manager's env, CODER_CHAT_ID comes last, workdir is used", async () => {
    const m = new ProcessManager({
      clock: new ManualClock(),
      defaultDir: "/",
      env: { PATH: process.env.PATH, BASE: "base", FOO: "base" },
    });
    managers.push(m);
    const res = await m.start({
      id: "p",
      chatId: "chat-a",
      command: 'echo "$BASE $FOO $CODER_CHAT_ID $(pwd)"',
      workdir: dir,
      env: { FOO: "foo", CODER_CHAT_ID: "forged" },
      startedAt: 0,
    });
    expect(res).toStrictEqual({ ok: true, id: "p" });
    const out = await m.output("p", undefined, { wait: true, signal: bounded() });
    expect(out?.output).toBe(`base foo chat-a ${dir}\n`);
  });

  it("runs in defaultDir without a workdir", async () => {
    const m = manager();
    await start(m, "p", "pwd");
    expect((await m.output("p", undefined, { wait: true, signal: bounded() }))?.output).toBe(
      `${dir}\n`,
    );
  });

  it("spawn failure with a missing workdir answers a failure and registers nothing", async () => {
    const m = manager();
    const res = await m.start({
      id: "p",
      command: "true",
      workdir: join(dir, "missing"),
      startedAt: 0,
    });
    expect(res).toMatchObject({ ok: false, message: "Failed to start process." });
    expect(res.ok ? "" : res.detail).toContain(join(dir, "missing"));
    expect(m.list(undefined, () => false)).toStrictEqual([]);
    expect(await output(m, "p")).toBeUndefined();
  });

  it("a duplicate id never spawns twice, even when both starts race", async () => {
    const m = manager();
    const cmd = `echo x >> ${join(dir, "runs")}`;
    const both = await Promise.all([
      m.start({ id: "p", command: cmd, startedAt: 0 }),
      m.start({ id: "p", command: cmd, startedAt: 0 }),
    ]);
    expect(both.filter((r) => r.ok)).toHaveLength(1);
    expect(await m.start({ id: "p", command: cmd, startedAt: 0 })).toMatchObject({ ok: false });
    await m.output("p", undefined, { wait: true, signal: bounded() });
    expect(readFileSync(join(dir, "runs"), "utf8")).toBe("x\n");
  });
});

describe("closeAll", () => {
  it("kills every running process group and waits for the exits", async () => {
    const m = manager(realClock);
    await start(m, "p", "echo $$; sleep 100 & sleep 100");
    const pgid = await shellPid(m, "p");
    await m.closeAll();
    expect(await output(m, "p")).toMatchObject({ running: false, exit_code: -1 });
    await until(() => livingMembers(pgid).length === 0, 2_000);
    expect(await m.start({ id: "q", command: "true", startedAt: 0 })).toMatchObject({ ok: false });
  });
});
