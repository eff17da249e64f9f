// `tether agent`: serves the workspace agent contract until SIGTERM or SIGINT, then kills
// every process it started and exits.

import { createAgentServer } from "../agent/index.ts";
import { parseListen } from "./listen.ts";
import { stopOnSignals } from "./signals.ts";

export interface AgentCommandOptions {
  listen: string;
  dir?: string;
  token?: string;
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
  const { host, port } = parseListen(o.listen);
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
