// `tether agent --server URL`: the workspace agent that dials out. It serves the contract over
// the connection it keeps to the server (src/agent/dialout.ts), logs each connect, disconnect,
// refusal and retry (never the token), and on SIGTERM or SIGINT stops dialling, kills every
// process it started and exits. The token comes from TETHER_AGENT_TOKEN and is taken out of the
// environment its processes inherit.

import { createAgentServer } from "../agent/index.ts";
import { dialOut, type DialEvent } from "../agent/dialout.ts";
import { realClock } from "../contract/index.ts";
import { createLogger } from "./log.ts";
import { stopOnSignals } from "./signals.ts";

export const AGENT_TOKEN_ENV = "TETHER_AGENT_TOKEN";

export interface DialoutAgentOptions {
  server: string;
  dir?: string;
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  pingIntervalMs?: number;
}

export async function runDialoutAgent(o: DialoutAgentOptions): Promise<void> {
  const token = process.env[AGENT_TOKEN_ENV];
  if (!token) {
    process.stderr.write(
      `tether agent --server needs the workspace's agent token in ${AGENT_TOKEN_ENV}.\n`,
    );
    process.exit(2);
  }
  const env = { ...process.env };
  delete env[AGENT_TOKEN_ENV];
  const log = createLogger().child({ component: "agent" });
  const agent = await createAgentServer({ dir: o.dir ?? process.cwd(), env });
  const dial = dialOut({
    serverUrl: o.server,
    token,
    handler: agent.handle,
    uptimeMs: () => realClock.now() - agent.store.startedAt,
    ...(o.reconnectMinMs !== undefined && { retryMinMs: o.reconnectMinMs }),
    ...(o.reconnectMaxMs !== undefined && { retryMaxMs: o.reconnectMaxMs }),
    ...(o.pingIntervalMs !== undefined && { pingIntervalMs: o.pingIntervalMs }),
    onEvent: (e) => logEvent(log, e),
  });
  stopOnSignals(async () => {
    await dial.close();
    await agent.close();
  });
}

function logEvent(log: ReturnType<typeof createLogger>, e: DialEvent): void {
  switch (e.kind) {
    case "connected":
      process.stdout.write(`connected to ${e.server}\n`);
      log.info({ server: e.server }, "connected to the server");
      return;
    case "disconnected":
      log.warn({ server: e.server, reason: e.reason }, "disconnected from the server");
      return;
    case "refused":
      log.warn(
        { server: e.server, status: e.status, code: e.code, reason: e.message },
        e.status === 401
          ? "the server refused the agent token; retrying (it may be restored)"
          : "the server refused the connection",
      );
      return;
    case "failed":
      log.warn({ server: e.server, error: e.error }, "cannot reach the server");
      return;
    case "retrying":
      log.info({ server: e.server, in_ms: e.inMs }, "reconnecting");
      return;
    default:
      e satisfies never;
  }
}
