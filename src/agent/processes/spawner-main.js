// The spawner: a small process that forks the agent's processes on its behalf. A fork costs
// time in proportion to the forking process's memory and blocks its event loop while it
// runs, so the agent — a large process serving requests — hands every fork to a spawner.
// spawner.c does it without a Node process around it and is used wherever it compiles; this
// is the same spawner in plain JavaScript, for where it does not (native-spawner.js). Both
// speak the frames of spawner-frames.js on stdin and stdout (spawner.c lists them): each
// child's output and exit go to the agent, and when the agent goes away (end of file on
// stdin) every process group started is killed, then the spawner exits.
//
// Each frame wakes the agent, so a process that ends costs one when it can: its output ends at
// end of file on both pipes (not at the pipes' handle close, a loop phase later), and an exit
// that finds the output already ended says so itself (`closed`) instead of a close after it.
//
// Plain JavaScript on purpose: it runs without the TypeScript loader, to stay small.

import { spawn } from "node:child_process";
import { readSync } from "node:fs";
import { Socket } from "node:net";
import { constants } from "node:os";
import { encodeFrame, FrameReader, splitNul } from "./spawner-frames.js";

/** The most a stop relays from one pipe: a child that keeps writing cannot make it endless. */
const STOP_DRAIN_MAX_BYTES = 1024 * 1024;

/** The base environment of every process, sent by the agent first. */
let baseEnv = {};
/** Live children by handle: until their exit and end of output are sent. */
const children = new Map();
/** Groups whose shell exited while a member still held the pipes: members may live on. */
const lingering = new Set();

/** To the agent: asynchronous writes (process.stdout on a pipe writes synchronously). */
const out = new Socket({ fd: 1, readable: false, writable: true });
out.on("error", () => {}); // the agent is gone: its end of file on stdin comes next

function send(type, id, payload, stream) {
  // Backpressure: a child that writes faster than the agent reads waits for the pipe.
  const ok = out.write(encodeFrame(type, id, payload), () => stream?.resume());
  if (!ok) stream?.pause();
}

const int32 = (...values) => {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeInt32LE(v, 4 * i));
  return b;
};

function start(id, cwd, command, env) {
  let child;
  try {
    child = spawn("sh", ["-c", command], {
      cwd,
      env: { ...baseEnv, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
  } catch (err) {
    send("f", id, Buffer.from(String(err?.message ?? err)));
    return;
  }
  // A pid means it started (Node emits "spawn" a tick later); without one, "error" says why.
  if (child.pid === undefined) {
    child.once("error", (err) => send("f", id, Buffer.from(err.message)));
    return;
  }
  children.set(id, child);
  send("p", id, int32(child.pid));
  // Output ends when both pipes ended (every "data" came before) or closed (an error, or a
  // stop). The one that completes the pair of exit and end of output sends "closed", unless a
  // stop already did (it took the child out of `children`).
  let exited = false;
  let open = 2;
  for (const stream of [child.stdout, child.stderr]) {
    stream.on("data", (chunk) => send("d", id, chunk, stream));
    stream.on("error", () => {});
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      if (--open === 0 && exited && children.delete(id)) send("c", id);
    };
    stream.once("end", end);
    stream.once("close", end);
  }
  child.once("exit", (code, signal) => {
    exited = true;
    const closed = open === 0 && children.delete(id);
    const payload = Buffer.concat([
      int32(code ?? -1, signal ? constants.signals[signal] : 0),
      Buffer.of(closed ? 1 : 0),
    ]);
    send("x", id, payload);
  });
}

// The agent stops reading a process whose shell exited while something still holds its pipes.
// What the shell wrote before it exited may not be relayed yet: held in a stream paused by
// backpressure, or still in the pipe. Relay all of it, in order, then close: the agent records
// the exit at that close, so its output is never cut short of what the shell wrote.
function stopReading(id) {
  const child = children.get(id);
  if (!child) return; // it closed on its own: that close is already on its way
  children.delete(id);
  lingering.add(child.pid);
  for (const stream of [child.stdout, child.stderr]) {
    stream.removeAllListeners("data");
    const relay = (chunk) => send("d", id, chunk);
    for (let chunk = stream.read(); chunk !== null; chunk = stream.read()) relay(chunk);
    drainPipe(stream, relay);
    stream.destroy();
  }
  send("c", id);
}

/** Relays what the pipe under `stream` holds now, without waiting (its fd is non-blocking). */
function drainPipe(stream, relay) {
  const fd = stream._handle?.fd;
  if (typeof fd !== "number" || fd < 0) return;
  const buf = Buffer.allocUnsafe(64 * 1024);
  for (let left = STOP_DRAIN_MAX_BYTES; left > 0;) {
    let n;
    try {
      n = readSync(fd, buf, 0, Math.min(buf.length, left), null);
    } catch {
      return; // EAGAIN: nothing more now
    }
    if (n === 0) return; // end of file
    relay(Buffer.from(buf.subarray(0, n)));
    left -= n;
  }
}

const frames = new FrameReader();
process.stdin.on("data", (chunk) =>
  frames.push(chunk, (type, id, payload) => {
    if (type === "e") baseEnv = envOf(splitNul(payload));
    else if (type === "s") {
      const [cwd = "", command = "", ...env] = splitNul(payload);
      start(id, cwd, command, envOf(env));
    } else if (type === "r") stopReading(id);
  }),
);

function envOf(entries) {
  const env = {};
  for (const e of entries) {
    const eq = e.indexOf("=");
    if (eq > 0) env[e.slice(0, eq)] = e.slice(eq + 1);
  }
  return env;
}

// The agent is gone (exit, crash or kill): nobody is left to read or stop these processes.
process.stdin.on("close", () => {
  for (const pid of [...[...children.values()].map((c) => c.pid), ...lingering]) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  process.exit(0);
});
