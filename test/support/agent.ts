// An in-process workspace agent on a free loopback port, with its own temp directory, for
// tests that speak real HTTP to it. `close()` kills its processes and removes the directory.
// Over `dialout` (agentTransport.kind, or the option) the agent listens nowhere: it dials a
// front (dialout.ts) whose URL forwards each request onto the agent's HTTP/2 connection, and
// its client goes through the DialoutTransport chatd uses.

import { mkdtemp, rm } from "node:fs/promises";
import { afterEach } from "vitest";
import os from "node:os";
import path from "node:path";
import { createAgentServer, type AgentServer } from "../../src/agent/index.ts";
import {
  AgentClient,
  ManualClock,
  realClock,
  type Clock,
  type ProcessInfo,
} from "../../src/contract/index.ts";
import { DialoutTransport } from "../../src/chatd/dialout/index.ts";
import { dialFront, startDialoutFront } from "./dialout.ts";

/** How test agents are reached unless a test says otherwise: a file may switch it before it loads tests. */
export const agentTransport: { kind: "listen" | "dialout" } = { kind: "listen" };

export interface TestAgent {
  url: string;
  dir: string;
  server: AgentServer;
  client: AgentClient;
  /** Every process of every chat (HTTP lists are per chat): read from the agent itself. */
  allProcesses(): ProcessInfo[];
  close(): Promise<void>;
}

/** Real time that can be moved forward at once: an agent that has "been up" for a while. */
export class JumpClock implements Clock {
  #skew = 0;
  now(): number {
    return realClock.now() + this.#skew;
  }
  setTimer(ms: number, fn: () => void) {
    return realClock.setTimer(ms, fn);
  }
  jump(ms: number): void {
    this.#skew += ms;
  }
}

/**
 * Starts an agent whose clock then moves a minute ahead, so a tool call of age 0 is past the
 * age margin and runs. The default clock is real time; pass a ManualClock to drive it.
 */
export async function startTestAgent(
  o: {
    clock?: ManualClock | JumpClock;
    token?: string;
    exitGraceMs?: number;
    transport?: "listen" | "dialout";
  } = {},
): Promise<TestAgent> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-agent-"));
  const clock = o.clock ?? new JumpClock();
  const server = await createAgentServer({
    dir,
    clock,
    ...(o.token && { token: o.token }),
    ...(o.exitGraceMs !== undefined && { exitGraceMs: o.exitGraceMs }),
  });
  if (clock instanceof ManualClock) clock.advance(60_000);
  else clock.jump(60_000);
  if ((o.transport ?? agentTransport.kind) === "dialout") {
    const front = await startDialoutFront({ token: "dial-token" });
    const dial = await dialFront(front, {
      token: "dial-token",
      handler: server.handle,
      uptimeMs: () => clock.now() - server.store.startedAt,
    });
    const client = new AgentClient({
      transport: new DialoutTransport({ workspaceId: "test", router: front }),
      ...(o.token && { token: o.token }),
    });
    return {
      url: front.url,
      dir,
      server,
      client,
      allProcesses: () => server.processes.all(),
      async close() {
        client.close();
        await dial.close();
        await front.close();
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  const url = await server.listen("127.0.0.1", 0);
  const client = new AgentClient({ baseUrl: url, ...(o.token && { token: o.token }) });
  return {
    url,
    dir,
    server,
    client,
    allProcesses: () => server.processes.all(),
    async close() {
      client.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Polls until `cond` holds (real time), failing after `ms`. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** For a test file: starts agents, and closes each after its test, even when the test fails. */
export function useAgents(): typeof startTestAgent {
  const live: TestAgent[] = [];
  afterEach(async () => {
    await Promise.all(live.splice(0).map((a) => a.close()));
  });
  return async (o) => {
    const a = await startTestAgent(o);
    live.push(a);
    return a;
  };
}
