// `tether agent`: serves the workspace agent contract until SIGTERM or SIGINT, then kills
// every process it started and exits. With --server it dials out instead (agent-dialout.ts).

import { readFileSync } from "node:fs";
import { createAgentServer } from "../agent/index.ts";
import { AGENT_TOKEN_ENV, runDialoutAgent } from "./agent-dialout.ts";
import { parseListen } from "./listen.ts";
import { stopOnSignals } from "./signals.ts";

export interface AgentCommandOptions {
  listen?: string;
  /** Dial out to this server URL instead of listening (the token in TETHER_AGENT_TOKEN). */
  server?: string;
  dir?: string;
  token?: string;
  /** A file holding the token (its final newline ignored). */
  tokenFile?: string;
  /** Dial-out backoff and ping interval (tests make them short). */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  pingIntervalMs?: number;
}

/**
 * The token from TETHER_AGENT_TOKEN (how the server passes it: never on the command line),
 * taken out of the environment so the commands the agent runs do not inherit it.
 */
function takeEnvToken(): string | undefined {
  const token = process.env[AGENT_TOKEN_ENV];
  delete process.env[AGENT_TOKEN_ENV];
  return token === "" ? undefined : token;
}

/** Whether `host` is a loopback address: only this machine's users can reach it. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  if (/^::ffff:127\./.test(h)) return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The token of a --token-file: its content without the final newline; empty is none. */
function readTokenFile(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    fail(`cannot read --token-file ${file}: ${(err as Error).message}`);
  }
  const token = text.replace(/\r?\n$/, "");
  return token === "" ? undefined : token;
}

/** One line on stderr, exit 2: a refusal to start as configured. */
function fail(message: string): never {
  process.stderr.write(`tether agent: ${message}\n`);
  process.exit(2);
}

export async function runAgent(o: AgentCommandOptions): Promise<void> {
  if (o.server !== undefined) return runDialoutAgent({ ...o, server: o.server });
  const { host, port } = parseListen(o.listen ?? "");
  const fromEnv = takeEnvToken();
  const token =
    o.token || (o.tokenFile !== undefined ? readTokenFile(o.tokenFile) : undefined) || fromEnv;
  if (!token && !isLoopbackHost(host)) {
    fail(
      `refusing to listen on ${host} without a token: anyone who reaches it could run commands. ` +
        `Set ${AGENT_TOKEN_ENV}, --token-file or --token, or listen on 127.0.0.1.`,
    );
  }
  const agent = await createAgentServer({
    dir: o.dir ?? process.cwd(),
    ...(token && { token }),
  });
  const url = await agent.listen(host, port);
  process.stdout.write(`listening on ${url}\n`);
  stopOnSignals(() => agent.close());
}
