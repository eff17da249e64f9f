// The floor of the start-and-wait benchmark: a bare node:http server that spawns on start and
// answers output-wait on exit, with no contract logic, no validation and no framework. Plain
// JavaScript run by plain node, so nothing (no loader, no modules) makes it heavier. It does the
// process work any implementation of the contract must (CONTRACT.md 7): `sh -c` in its own
// process group with stdin closed, stdout and stderr read into one output, and an exit that
// counts once the shell exited and that output reached end of file.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";

/** @type {Map<string, Promise<{ code: number, output: string }>>} */
const exits = new Map();

/** @param {import("node:child_process").ChildProcess} child */
function exited(child) {
  return new Promise((resolve) => {
    /** @type {Buffer[]} */
    const output = [];
    let code = -1;
    let pending = 3; // the exit and end of file on both pipes
    const done = () => {
      if (--pending === 0) resolve({ code, output: Buffer.concat(output).toString() });
    };
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on("data", (c) => output.push(c));
      stream?.once("end", done);
    }
    child.once("exit", (c) => {
      code = c ?? -1;
      done();
    });
  });
}

const server = http.createServer((req, res) => {
  /** @type {Buffer[]} */
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.method === "POST" && req.url === "/api/v0/processes/start") {
      const { command } = JSON.parse(Buffer.concat(chunks).toString());
      const id = randomUUID();
      const child = spawn("sh", ["-c", command], {
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      exits.set(id, exited(child));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ id, started: true }));
      return;
    }
    const m = /^\/api\/v0\/processes\/([^/]+)\/output/.exec(req.url ?? "");
    const exit = m ? exits.get(m[1]) : undefined;
    if (!exit) {
      res.statusCode = 404;
      res.end();
      return;
    }
    void exit.then(({ code, output }) => {
      exits.delete(m[1]);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ output, running: false, exit_code: code }));
    });
  });
});

server.listen(0, "127.0.0.1", () => {
  const addr = /** @type {import("node:net").AddressInfo} */ (server.address());
  process.stdout.write(`listening on http://127.0.0.1:${addr.port}\n`);
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
