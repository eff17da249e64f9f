// The agent's HTTP router on its own: routing, bodies under a limit, a handler that fails, and a
// close that neither waits on a kept-alive connection nor takes new requests.

import http from "node:http";
import { inject } from "light-my-request";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../contract/index.ts";
import { rawRequest } from "../../test/support/http.ts";
import { jsonAnswer } from "./answer.ts";
import { sendAnswer } from "./http-edge.ts";
import { AgentHttp, type AgentRequest } from "./http-router.ts";

const edges: AgentHttp[] = [];
afterEach(async () => {
  await Promise.all(edges.splice(0).map((e) => e.close()));
});

async function edge(setup: (app: AgentHttp, seen: AgentRequest[]) => void) {
  const app = new AgentHttp(new ManualClock());
  const seen: AgentRequest[] = [];
  setup(app, seen);
  edges.push(app);
  return { app, seen, url: await app.listen("127.0.0.1", 0) };
}

/** A GET on a kept-alive connection, answering its status and Connection header. */
function keptAliveGet(url: string, agent: http.Agent) {
  return new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on("end", () =>
          resolve({ status: res.statusCode!, connection: res.headers.connection }),
        );
      })
      .on("error", reject);
  });
}

describe("the agent's HTTP router", () => {
  it("routes by method and path, decodes parameters and queries, and hands on the body's bytes", async () => {
    const { url, seen } = await edge((app, seen) => {
      app.post("/things/:id/poke", (request, res) => {
        seen.push(request);
        sendAnswer(res, jsonAnswer(200, { ok: true }));
      });
    });
    const res = await rawRequest(url, {
      path: "/things/a%2Fb/poke?x=1&y=two+words&x=2",
      headers: { "content-type": "application/octet-stream" },
      body: Buffer.from([0, 1, 2, 255]),
    });
    expect(res.status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.params).toEqual({ id: "a/b" });
    expect({ ...seen[0]!.query }).toEqual({ x: ["1", "2"], y: "two words" });
    expect([...seen[0]!.body]).toEqual([0, 1, 2, 255]);

    for (const [method, path] of [
      ["GET", "/things/a/poke"],
      ["POST", "/things//poke"],
      ["POST", "/things/a/poke/more"],
    ] as const) {
      const miss = await rawRequest(url, { method, path });
      expect(miss.status).toBe(404);
      expect(miss.json()).toEqual({ message: `Route ${method} ${path} not found.` });
    }
    const bad = await rawRequest(url, { method: "POST", path: "/things/%E0%A4%A/poke" });
    expect(bad.status).toBe(400);
    expect(seen).toHaveLength(1);
  });

  it("a body over the route's limit is a 413 and the handler never runs", async () => {
    const { url, seen } = await edge((app, seen) => {
      app.post(
        "/small",
        (request, res) => {
          seen.push(request);
          sendAnswer(res, jsonAnswer(200, {}));
        },
        { bodyLimit: 8 },
      );
    });
    const declared = await rawRequest(url, { path: "/small", body: Buffer.alloc(9) });
    expect(declared.status).toBe(413);
    expect(declared.json()).toEqual({
      message: "Request body is too large.",
      detail: "Send at most 8 bytes.",
    });
    expect(declared.headers.connection).toBe("close");
    // Chunked, so no Content-Length says so up front: counted as it arrives.
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${url}/small`, { method: "POST" }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on("error", reject);
      req.write(Buffer.alloc(5));
      req.end(Buffer.alloc(5));
    });
    expect(streamed).toBe(413);
    expect(seen).toHaveLength(0);
  });

  it("a handler that throws or rejects is a 500, and the edge goes on serving", async () => {
    const { url } = await edge((app) => {
      app.get("/throws", () => {
        throw new Error("boom");
      });
      app.get("/rejects", () => Promise.reject(new Error("boom")));
      app.get("/ok", (_request, res) => sendAnswer(res, jsonAnswer(200, { ok: true })));
    });
    for (const path of ["/throws", "/rejects"]) {
      const res = await rawRequest(url, { path });
      expect(res.status).toBe(500);
      expect(res.json()).toEqual({ message: "Internal error." });
    }
    expect((await rawRequest(url, { path: "/ok" })).json()).toEqual({ ok: true });
  });

  it("close answers what is in flight with Connection: close and waits on no idle connection", async () => {
    let release!: () => void;
    const { app, url } = await edge((app) => {
      app.get(
        "/slow",
        (_request, res) =>
          new Promise<void>((resolve) => {
            release = () => {
              sendAnswer(res, jsonAnswer(200, { ok: true }));
              resolve();
            };
          }),
      );
    });
    const agent = new http.Agent({ keepAlive: true });
    try {
      const inFlight = keptAliveGet(`${url}/slow`, agent);
      await until(() => release !== undefined);
      let closed = false;
      const closing = app.close().then(() => (closed = true));
      await new Promise((r) => setTimeout(r, 50));
      expect(closed).toBe(false); // the request in flight is answered first
      release();
      expect(await inFlight).toEqual({ status: 200, connection: "close" });
      await closing; // without Connection: close, it waited out the keep-alive timeout
      await expect(keptAliveGet(`${url}/slow`, agent)).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      agent.destroy();
    }
  });

  it("a request that arrives while closing is a 503 that closes its connection", async () => {
    const { app } = await edge(() => {});
    void app.close();
    const res = await inject(app.handle, { method: "GET", url: "/x" });
    const got = { status: res.statusCode, body: res.body, connection: res.headers.connection };
    expect(got).toEqual({
      status: 503,
      body: JSON.stringify({ message: "The workspace agent is shutting down." }),
      connection: "close",
    });
  });
});

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}
