// A tool result about a failed connection never carries the socket's error (an address, a port,
// ECONNREFUSED, "socket hang up"): an agent URL must not be a probe of the server's network.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AgentClient, isPublicAddress } from "../contract/index.ts";
import { classifyAgentError, readFailureMessage } from "./tools/failures.ts";

const LEAKS = ["ECONNREFUSED", "127.0.0.1", "hang up", "socket"];

describe("tool results of agent connection failures", () => {
  const closing: (() => void)[] = [];
  afterEach(() => {
    for (const c of closing.splice(0)) c();
  });

  const failureOf = async (client: AgentClient): Promise<string> => {
    closing.push(() => client.close());
    const err = await client.info({ timeoutMs: 5_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    const f = classifyAgentError(err, new AbortController().signal);
    expect(f.kind).toBe("unknown");
    return readFailureMessage(f);
  };

  it("a refused, a hung-up and a policy-refused connection say so without the socket's words", async () => {
    const server = http.createServer((req) => req.socket.destroy());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    closing.push(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const texts = [
      await failureOf(new AgentClient({ baseUrl: "http://127.0.0.1:1" })),
      await failureOf(new AgentClient({ baseUrl: `http://127.0.0.1:${port}` })),
      await failureOf(
        new AgentClient({ baseUrl: `http://localhost:${port}`, allowAddress: isPublicAddress }),
      ),
    ];
    for (const t of texts) for (const leak of LEAKS) expect(t).not.toContain(leak);
    expect(texts[0]).toContain("could not be reached");
    expect(texts[2]).toContain("not a public one");
  });
});
