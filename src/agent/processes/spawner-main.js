// The spawner: a small process that forks the agent's processes on its behalf. A fork costs
// time in proportion to the forking process's memory and blocks its event loop while it
// runs, so the agent — a large process serving requests — hands every fork to this one,
// which loads nothing but Node's own modules. It relays each child's output and exit over
// IPC, and when the agent goes away it kills every process group it started, then exits.
//
// Plain JavaScript on purpose: it runs without the TypeScript loader, to stay small.

import { spawn } from "node:child_process";

/** The base environment of every process, sent by the agent first. */
let baseEnv = {};
/** Live children by process id (the agent's ID): they still have output to relay. */
const children = new Map();
/** Groups whose shell exited while a member still held the pipes: members may live on. */
const lingering = new Set();

function send(message, stream) {
  if (!process.connected) return;
  // Backpressure: a child that writes faster than the agent reads waits for the channel.
  const ok = process.send(message, undefined, {}, () => stream?.resume());
  if (!ok) stream?.pause();
}

function start({ id, command, cwd, env }) {
  let child;
  try {
    child = spawn("sh", ["-c", command], {
      cwd,
      env: { ...baseEnv, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
  } catch (err) {
    send({ t: "failed", id, message: String(err?.message ?? err) });
    return;
  }
  let started = false;
  child.once("error", (err) => {
    if (!started) send({ t: "failed", id, message: err.message });
  });
  child.once("spawn", () => {
    started = true;
    children.set(id, child);
    send({ t: "spawned", id, pid: child.pid });
  });
  for (const stream of [child.stdout, child.stderr]) {
    stream.on("data", (chunk) => send({ t: "data", id, chunk }, stream));
    stream.on("error", () => {});
  }
  child.once("exit", (code, signal) => send({ t: "exit", id, code, signal }));
  child.once("close", () => {
    if (!children.delete(id)) return;
    send({ t: "close", id });
  });
}

function stopReading({ id }) {
  const child = children.get(id);
  if (!child) return;
  children.delete(id);
  lingering.add(child.pid);
  child.stdout.destroy();
  child.stderr.destroy();
}

process.on("message", (m) => {
  if (m.t === "init") baseEnv = m.env;
  else if (m.t === "spawn") start(m);
  else if (m.t === "stop-reading") stopReading(m);
});

// The agent is gone (exit, crash or kill): nobody is left to read or stop these processes.
process.on("disconnect", () => {
  for (const pid of [...[...children.values()].map((c) => c.pid), ...lingering]) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  process.exit(0);
});
