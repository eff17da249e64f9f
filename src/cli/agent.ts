// `tether agent`: serves the workspace agent contract until SIGTERM or SIGINT, then kills
// every process it started and exits. With --server it dials out instead (agent-dialout.ts).

import { createAgentServer } from "../agent/index.ts";
import { runDialoutAgent } from "./agent-dialout.ts";
import { parseListen } from "./listen.ts";
import { stopOnSignals } from "./signals.ts";

export interface AgentCommandOptions {
  listen?: string;
  /** Dial out to this server URL instead of listening (the token in TETHER_AGENT_TOKEN). */
  server?: string;
  dir?: string;
  token?: string;
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
  const token = process.env.TETHER_AGENT_TOKEN;
  delete process.env.TETHER_AGENT_TOKEN;
  return token === "" ? undefined : token;
}

export async function runAgent(o: AgentCommandOptions): Promise<void> {
  if (o.server !== undefined) return runDialoutAgent({ ...o, server: o.server });
  const { host, port } = parseListen(o.listen ?? "");
  const fromEnv = takeEnvToken();
  const token = o.token ?? fromEnv;
  const agent = await createAgentServer({
    dir: o.dir ?? process.cwd(),
    ...(token && { token }),
  });
  const url = await agent.listen(host, port);
  process.stdout.write(`listening on ${url}\n`);
  stopOnSignals(() => agent.close());
}
