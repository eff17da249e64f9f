// The floor of the start-and-wait benchmark: a bare node:http server that spawns on start and
// answers output-wait on exit, with no contract logic, no validation and no framework.

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";

const exits = new Map<string, Promise<number>>();

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    if (req.method === "POST" && req.url === "/api/v0/processes/start") {
      const { command } = JSON.parse(Buffer.concat(chunks).toString()) as { command: string };
      const id = randomUUID();
      const child = spawn("sh", ["-c", command], { stdio: "ignore", detached: true });
      exits.set(id, new Promise((r) => child.once("exit", (code) => r(code ?? -1))));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ id, started: true }));
      return;
    }
    const m = /^\/api\/v0\/processes\/([^/]+)\/output/.exec(req.url ?? "");
    const exit = m ? exits.get(m[1]!) : undefined;
    if (!exit) {
      res.statusCode = 404;
      res.end();
      return;
    }
    void exit.then((code) => {
      exits.delete(m![1]!);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ output: "", running: false, exit_code: code }));
    });
  });
});

server.listen(0, "127.0.0.1", () => {
  const addr = server.address() as { port: number };
  process.stdout.write(`listening on http://127.0.0.1:${addr.port}\n`);
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
