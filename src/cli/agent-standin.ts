// STAND-IN until the dialout branch merges (delete this file and take their `agent
// --server`): `tether agent --server URL` with TETHER_AGENT_TOKEN, done the simple way — the
// agent listens on 127.0.0.1 (token required) and registers that URL with the server, again
// every second, so a restarted server or another replica learns it too. Works only where the
// server reaches the agent's loopback (the same machine, or a container on the host network).

import { createAgentServer } from "../agent/index.ts";
import { stopOnSignals } from "./signals.ts";

const REGISTER_EVERY_MS = 1_000;
const REGISTER_ROUTE = "/standin/v1/agents/register";

export async function runDialOutStandIn(o: { server: string; dir?: string }): Promise<void> {
  const token = process.env.TETHER_AGENT_TOKEN;
  if (!token) {
    process.stderr.write("tether agent --server needs the agent token in TETHER_AGENT_TOKEN.\n");
    process.exit(2);
  }
  const agent = await createAgentServer({ dir: o.dir ?? process.cwd(), token });
  const url = await agent.listen("127.0.0.1", 0);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let warned = false;
  const register = async (): Promise<void> => {
    try {
      const res = await fetch(new URL(REGISTER_ROUTE, o.server), {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ url }),
        signal: AbortSignal.timeout(REGISTER_EVERY_MS * 5),
      });
      if (!res.ok && !warned) {
        warned = true;
        process.stderr.write(`the server refused the agent: ${res.status} ${await res.text()}\n`);
      }
      if (res.ok) warned = false;
    } catch {
      // the server is down: try again
    }
    if (!stopped) timer = setTimeout(() => void register(), REGISTER_EVERY_MS);
  };
  await register();
  process.stdout.write(`dialing ${o.server} (stand-in: listening on ${url})\n`);
  stopOnSignals(async () => {
    stopped = true;
    clearTimeout(timer);
    await agent.close();
  });
}
