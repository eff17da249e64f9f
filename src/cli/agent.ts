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

export async function runAgent(o: AgentCommandOptions): Promise<void> {
  const { host, port } = parseListen(o.listen);
  const agent = await createAgentServer({
    dir: o.dir ?? process.cwd(),
    ...(o.token && { token: o.token }),
  });
  const url = await agent.listen(host, port);
  process.stdout.write(`listening on ${url}\n`);
  stopOnSignals(() => agent.close());
}
