// The dial-out transport's waits and ages, in process over real sockets: an agent (its handler
// records what it received) dials a test front; requests go through DialoutTransport directly or
// through the relay between replicas (RelayClient → serveRelayedExchange on a holder's HTTP
// server), while the agent is connected, not yet connected, or never.

import http from "node:http";
import type http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { dialOut, type DialOut } from "../../src/agent/dialout.ts";
import {
  AGE_HEADER,
  AgentClient,
  AgentConnectionError,
  parseChatId,
  toMessageId,
} from "../../src/contract/index.ts";
import { until } from "../support/agent.ts";
import { startDialoutFront, type DialoutFront } from "../support/dialout.ts";
import { RelayClient, serveRelayedExchange } from "../../src/chatd/dialout/relay.ts";
import {
  DialoutTransport,
  type AgentRoute,
  type AgentRouter,
} from "../../src/chatd/dialout/transport.ts";

const live: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const x of live.splice(0).reverse()) await x.close();
});

const toolCall = {
  chatId: parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")!,
  messageId: toMessageId(1)!,
  toolCallId: "t1",
  ageMs: 1_000,
};

/** A front and, once `connect()` is called, an agent whose handler records each request's age. */
async function setup() {
  const front = await startDialoutFront({ token: "t" });
  live.push(front);
  const seen: { ageMs: number; at: number }[] = [];
  let dial: DialOut | undefined;
  const connect = async () => {
    const connected = front.connected();
    dial = dialOut({
      serverUrl: front.url,
      token: "t",
      retryMinMs: 20,
      retryMaxMs: 100,
      uptimeMs: () => 60_000,
      handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
        const age = req.headers[AGE_HEADER.toLowerCase()];
        seen.push({ ageMs: Number(age), at: Date.now() });
        if (req.method === "GET") return; // reads are held: a test cuts the connection meanwhile
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ id: "p", started: true }));
      },
    });
    live.push(dial);
    await connected;
  };
  return { front, seen, connect };
}

/**
 * A holder replica's internal route, serving relayed requests on the front's session, as if
 * each had spent `spentMs` in the holder before it went onto the session.
 */
async function holder(front: DialoutFront, spentMs = 0): Promise<string> {
  const server = http.createServer((req, res) => {
    const enteredAt = performance.timeOrigin + performance.now() - spentMs;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void serveRelayedExchange(front.session(), req, Buffer.concat(chunks), res, { enteredAt });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  live.push({
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Routes to `route()` (re-read on every look), polling every 20 ms. */
function router(route: () => AgentRoute): AgentRouter {
  return {
    route: async () => route(),
    changed: (_ws, signal) =>
      new Promise((resolve, reject) => {
        const t = setTimeout(resolve, 20);
        signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(signal.reason as Error);
        });
      }),
  };
}

describe("DialoutTransport", () => {
  it("a request to an agent that is not connected yet waits for it, and its age grows by the wait", async () => {
    const { front, seen, connect } = await setup();
    const client = new AgentClient({
      transport: new DialoutTransport({ workspaceId: "w", router: front }),
    });
    const began = Date.now();
    const answer = client.startProcess({ command: "true" }, { toolCall });
    await new Promise((r) => setTimeout(r, 300));
    await connect();
    await answer;
    expect(seen).toHaveLength(1);
    // Stamped as it went out: the call's age plus all the time spent finding the agent.
    expect(seen[0]!.ageMs).toBeGreaterThanOrEqual(1_300);
    expect(seen[0]!.ageMs).toBeLessThanOrEqual(1_000 + (seen[0]!.at - began));
  });

  it("a request to an agent that never connects ends at its own bound as unreachable: nothing was sent", async () => {
    const { front, seen } = await setup();
    const client = new AgentClient({
      transport: new DialoutTransport({ workspaceId: "w", router: front }),
    });
    const err = await client
      .startProcess({ command: "true" }, { toolCall }, { timeoutMs: 200 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentConnectionError);
    expect((err as AgentConnectionError).phase).toBe("connect");
    expect(seen).toHaveLength(0);
  });

  it("through the replica holding the agent: the age is the caller's plus its wait plus the holder's time, and a holder that lost the agent sends nothing", async () => {
    const { front, seen, connect } = await setup();
    const address = await holder(front, 200);
    const relay = new RelayClient({ secret: "s" });
    live.push(relay);
    // First the registry names a holder without the agent (it answers "not here"), then none.
    let route: AgentRoute = { kind: "relay", workerId: "h", address };
    const client = new AgentClient({
      transport: new DialoutTransport({ workspaceId: "w", router: router(() => route), relay }),
    });
    const began = Date.now();
    const answer = client.startProcess({ command: "true" }, { toolCall });
    await new Promise((r) => setTimeout(r, 150));
    route = { kind: "none" };
    await new Promise((r) => setTimeout(r, 150));
    await connect();
    route = { kind: "relay", workerId: "h", address };
    expect((await answer).id).toBe("p");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.ageMs).toBeGreaterThanOrEqual(1_000 + 300 + 200);
    expect(seen[0]!.ageMs).toBeLessThanOrEqual(1_000 + 200 + (seen[0]!.at - began));
  });

  it("a relayed request whose agent connection is lost after it went out is an exchange failure (the tools send it again)", async () => {
    const { front, seen, connect } = await setup();
    await connect();
    const address = await holder(front);
    const relay = new RelayClient({ secret: "s" });
    live.push(relay);
    const client = new AgentClient({
      transport: new DialoutTransport({
        workspaceId: "w",
        router: router(() => ({ kind: "relay", workerId: "h", address })),
        relay,
      }),
    });
    const pending = client.processOutput("p", { wait: true }).catch((e: unknown) => e);
    await until(() => seen.length === 1); // the agent has the request
    front.cut();
    const err = await pending;
    expect(err).toBeInstanceOf(AgentConnectionError);
    expect((err as AgentConnectionError).phase).toBe("exchange");
  });
});
