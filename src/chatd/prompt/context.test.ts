import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { AgentClient } from "../../contract/index.ts";
import { ContextPrefetch } from "./context.ts";

const servers: http.Server[] = [];
const clients: AgentClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** An agent stand-in whose context route answers as `answer` says (or never). */
async function agentAnswering(
  answer: ((res: http.ServerResponse) => void) | "never",
): Promise<{ client: AgentClient; received: () => number; closed: () => number }> {
  let received = 0;
  let closed = 0;
  const server = http.createServer((req, res) => {
    received++;
    req.on("close", () => closed++);
    if (answer !== "never") answer(res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const client = new AgentClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
  });
  clients.push(client);
  return { client, received: () => received, closed: () => closed };
}

const TIMEOUT_MS = 5_000;

it("a prefetch gives the agent's answer, a 404's note, or nothing when it failed or was not asked", async () => {
  const environment = {
    directory: "/w",
    os: "linux",
    arch: "x64",
    shell: "sh",
    date: "2026-12-04",
    git: null,
  };
  const ok = await agentAnswering((res) =>
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(
        JSON.stringify({ ...environment, files: [], limits: { file_bytes: 1, total_bytes: 1 } }),
      ),
  );
  const signal = new AbortController().signal;
  expect(await new ContextPrefetch(Promise.resolve(ok.client), TIMEOUT_MS).take(signal)).toEqual({
    environment,
    files: [],
  });
  const old = await agentAnswering((res) => res.writeHead(404).end());
  const noted = await new ContextPrefetch(Promise.resolve(old.client), TIMEOUT_MS).take(signal);
  expect(noted).toMatchObject({ environment: null, files: [] });
  expect(noted?.note).toMatch(/does not report its environment/);
  const failing = await agentAnswering((res) => res.writeHead(500).end());
  expect(
    await new ContextPrefetch(Promise.resolve(failing.client), TIMEOUT_MS).take(signal),
  ).toBeUndefined();
  // Not one the owner may use as far as the replica knows, or its row could not be read.
  expect(await new ContextPrefetch(Promise.resolve(undefined), TIMEOUT_MS).take(signal)).toBe(
    undefined,
  );
  expect(
    await new ContextPrefetch(Promise.reject(new Error("db down")), TIMEOUT_MS).take(signal),
  ).toBeUndefined();
});

it("a prefetch stops asking when its taker's signal ends, or when it is dropped", async () => {
  const hanging = await agentAnswering("never");
  const ac = new AbortController();
  const taken = new ContextPrefetch(Promise.resolve(hanging.client), TIMEOUT_MS).take(ac.signal);
  const reason = new Error("the task is stale");
  setTimeout(() => ac.abort(reason), 50);
  await expect(taken).rejects.toBe(reason);
  await expect.poll(hanging.closed).toBe(1);
  const dropped = new ContextPrefetch(Promise.resolve(hanging.client), TIMEOUT_MS);
  await expect.poll(hanging.received).toBe(2);
  dropped.drop();
  await expect.poll(hanging.closed).toBe(2);
  await expect(dropped.take(new AbortController().signal)).resolves.toBeUndefined();
});
