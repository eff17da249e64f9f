// The agent's dial-out loop over real sockets: its pauses are bounded, doubling and jittered; a
// refused token waits the longest pause; a connection whose pings go unanswered is dropped and
// dialled again, on either side.

import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startDialoutFront } from "../../test/support/dialout.ts";
import { until } from "../../test/support/agent.ts";
import { hostPort, startTcpProxy } from "../../test/support/tcp-proxy.ts";
import { DIAL_JITTER_RATIO, dialOut, type DialEvent } from "./dialout.ts";

const live: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const x of live.splice(0).reverse()) await x.close();
});

const answer = (_req: unknown, res: { end(s: string): void }) => res.end("{}");

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

describe("dialOut", () => {
  it("pauses between attempts double from the min to the max, each shortened by the jitter", async () => {
    const events: DialEvent[] = [];
    const d = dialOut({
      serverUrl: `http://127.0.0.1:${await deadPort()}`,
      token: "t",
      handler: answer,
      uptimeMs: () => 0,
      retryMinMs: 10,
      retryMaxMs: 40,
      random: () => 0.5,
      onEvent: (e) => events.push(e),
    });
    live.push(d);
    await until(() => events.filter((e) => e.kind === "retrying").length >= 5);
    const pauses = events.flatMap((e) => (e.kind === "retrying" ? [e.inMs] : []));
    const j = 1 - DIAL_JITTER_RATIO * 0.5;
    expect(pauses.slice(0, 5)).toEqual([10, 20, 40, 40, 40].map((ms) => Math.round(ms * j)));
    expect(events.some((e) => e.kind === "failed")).toBe(true);
    expect(d.connected).toBe(false);
  });

  it("a refused token waits the longest pause, and the agent keeps dialling", async () => {
    const front = await startDialoutFront({ token: "right" });
    live.push(front);
    const events: DialEvent[] = [];
    const d = dialOut({
      serverUrl: front.url,
      token: "wrong",
      handler: answer,
      uptimeMs: () => 0,
      retryMinMs: 10,
      retryMaxMs: 60,
      random: () => 0,
      onEvent: (e) => events.push(e),
    });
    live.push(d);
    await until(() => events.filter((e) => e.kind === "refused").length >= 2);
    expect(events.find((e) => e.kind === "refused")).toMatchObject({
      status: 401,
      code: "agent_token_invalid",
    });
    expect(events.find((e) => e.kind === "retrying")).toMatchObject({ inMs: 60 });
  });

  it("an agent whose pings go unanswered drops the connection and dials again", async () => {
    const front = await startDialoutFront({ token: "t", session: { pingIntervalMs: 600_000 } });
    live.push(front);
    const proxy = await startTcpProxy([hostPort(front.url)]);
    live.push(proxy);
    const events: DialEvent[] = [];
    const d = dialOut({
      serverUrl: proxy.url,
      token: "t",
      handler: answer,
      uptimeMs: () => 0,
      retryMinMs: 10,
      retryMaxMs: 50,
      pingIntervalMs: 100,
      onEvent: (e) => events.push(e),
    });
    live.push(d);
    await until(() => d.connected);
    proxy.freezeAll();
    await until(() => events.some((e) => e.kind === "disconnected"));
    expect(events.find((e) => e.kind === "disconnected")).toMatchObject({
      reason: "the server did not answer a ping",
    });
    await until(() => events.filter((e) => e.kind === "connected").length === 2);
  });

  it("the server drops an agent whose pings go unanswered", async () => {
    const front = await startDialoutFront({ token: "t", session: { pingIntervalMs: 100 } });
    live.push(front);
    const proxy = await startTcpProxy([hostPort(front.url)]);
    live.push(proxy);
    const d = dialOut({
      serverUrl: proxy.url,
      token: "t",
      handler: answer,
      uptimeMs: () => 0,
      pingIntervalMs: 600_000,
    });
    live.push(d);
    const first = await front.connected();
    proxy.freezeAll();
    await until(() => first.destroyed);
    // The front lets go of it (its close handler may run a tick after the destroy).
    await until(() => front.session() !== first);
  });
});
