import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualClock, RUN_AGE_HEADER } from "../../contract/index.ts";
import { headerValues, rawRequest } from "../../../test/support/http.ts";
import { newChat, tcHeaders, tcUuid, type TestToolCall } from "../../../test/support/toolcall.ts";
import { jsonAnswer, type Answer } from "../answer.ts";
import type { AgentResponse } from "../http-edge.ts";
import { AgentHttp, type AgentRequest } from "../http-router.ts";
import { cancelRoute } from "./cancel.ts";
import { inputHash, waitForRecord, withToolCalls, type RequestInput } from "./middleware.ts";
import { ToolCallRecord, ToolCallStore, type ToolCallContext } from "./store.ts";

interface Seen {
  input: RequestInput;
  toolCall: ToolCallContext | undefined;
}

/** A test route behind the middleware; each run waits for `release()` when gated. */
async function harness(o: { gated?: boolean; run?: (seen: Seen) => Promise<Answer> } = {}) {
  const clock = new ManualClock();
  const store = new ToolCallStore(clock);
  clock.advance(60_000);
  const app = new AgentHttp(clock);
  const runs: Seen[] = [];
  const gates: (() => void)[] = [];
  const heads: { mock: { calls: unknown[] } }[] = [];
  // One handler on two paths and two methods: they all share the tool call's record.
  const handler = withToolCalls(store, (input) => ({
    kind: "run",
    run: async (toolCall) => {
      const seen = { input, toolCall };
      runs.push(seen);
      if (o.gated) await new Promise<void>((r) => gates.push(r));
      return o.run ? o.run(seen) : jsonAnswer(200, { n: runs.length });
    },
  }));
  app.route("POST", "/act", handler);
  app.route("PUT", "/act", handler);
  app.post("/act2", handler);
  // The cancel route, with a stopper that reports no process (the call started none).
  const stops: string[] = [];
  app.post(
    "/api/v0/tool-calls/:id/cancel",
    cancelRoute(store, {
      stopToolCallProcess: (id) => {
        stops.push(id);
        return Promise.resolve(undefined);
      },
    }),
  );
  // Every answer written, counted as its head is written (even to a client that left).
  const server = http.createServer((req, res) => {
    heads.push(vi.spyOn(res, "writeHead"));
    app.handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const release = async () => {
    await until(() => gates.length > 0);
    gates.shift()!();
  };
  return {
    clock,
    store,
    app,
    url,
    runs,
    release,
    stops,
    sends: () => heads.reduce((n, h) => n + h.mock.calls.length, 0),
  };
}

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise((resolve) => s.close(resolve));
    }),
  );
});

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

function call(
  url: string,
  tc: TestToolCall | undefined,
  body: object = { x: 1 },
  extra: Record<string, string | string[]> = {},
) {
  return rawRequest(url, {
    path: "/act?q=1",
    headers: { ...(tc && tcHeaders(tc)), ...extra },
    body,
  });
}

describe("tool call middleware", () => {
  it("no tool call headers pass through untouched: every request runs, no run age", async () => {
    const h = await harness();
    const a = await call(h.url, undefined);
    const b = await call(h.url, undefined);
    expect(a.json()).toEqual({ n: 1 });
    expect(b.json()).toEqual({ n: 2 });
    expect(headerValues(a, RUN_AGE_HEADER)).toEqual([]);
    expect(h.runs[0]!.toolCall).toBeUndefined();
  });

  it("bad headers get 400 with nothing recorded and nothing run", async () => {
    const h = await harness();
    const chatId = newChat();
    const tc = { chatId, message: 5, id: "call_1" };
    const bad: Record<string, string | string[]>[] = [
      { ...tcHeaders(tc), "Coder-Tool-Call-Message-Id": "0" },
      { ...tcHeaders(tc), "Coder-Tool-Call-Age-Ms": "-1" },
      { ...tcHeaders(tc), "Coder-Tool-Call-Id": ["a", "b"] },
      { "Coder-Chat-Id": chatId, "Coder-Tool-Call-Id": "a" },
    ];
    for (const headers of bad) {
      const res = await rawRequest(h.url, { path: "/act", headers, body: {} });
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({
        message: "Invalid tool call headers.",
        detail: expect.any(String),
      });
    }
    const noChat = { ...tcHeaders(tc), "Coder-Chat-Id": "not-a-uuid" };
    const res = await rawRequest(h.url, { path: "/act", headers: noChat, body: {} });
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ message: "Tool call headers require the Coder-Chat-Id header." });
    expect(h.runs).toHaveLength(0);
    expect(h.store.chatCount).toBe(0);
  });

  it("the handler sees the key, the UUID and the full body", async () => {
    const h = await harness();
    const tc = { chatId: newChat(), message: 42, id: "toolu/1 x" };
    const body = { text: "é".repeat(5000) };
    await call(h.url, tc, body);
    const seen = h.runs[0]!;
    expect(seen.toolCall?.uuid).toBe(tcUuid(tc));
    expect(seen.toolCall?.key.messageId).toBe(42n);
    expect(seen.toolCall?.key.toolCallId.toString()).toBe("toolu/1 x");
    expect(seen.toolCall?.key.chatId).toBe(tc.chatId);
    expect(seen.input.body.equals(Buffer.from(JSON.stringify(body)))).toBe(true);
  });

  it("only Content-Type, status and body are recorded and replayed", async () => {
    const h = await harness({
      run: async () => ({
        status: 201,
        contentType: "text/plain; charset=utf-8",
        body: Buffer.from([0xde, 0xad, 0x0a]),
      }),
    });
    const tc = { chatId: newChat(), message: 1, id: "c" };
    const first = await call(h.url, tc);
    const again = await call(h.url, tc);
    for (const res of [first, again]) {
      expect(res.status).toBe(201);
      expect(res.headers["content-type"]).toBe("text/plain; charset=utf-8");
      expect(res.body.equals(Buffer.from([0xde, 0xad, 0x0a]))).toBe(true);
      expect(headerValues(res, RUN_AGE_HEADER)).toHaveLength(1);
    }
    expect(h.runs).toHaveLength(1);
  });

  it("the run age header follows the driven clock: 300 then 1500", async () => {
    const h = await harness({ gated: true });
    const tc = { chatId: newChat(), message: 1, id: "c" };
    const first = call(h.url, tc);
    await until(() => h.runs.length === 1);
    h.clock.advance(300);
    await h.release();
    expect(headerValues(await first, RUN_AGE_HEADER)).toEqual(["300"]);
    h.clock.advance(1200);
    expect(headerValues(await call(h.url, tc), RUN_AGE_HEADER)).toEqual(["1500"]);
  });

  it("concurrent identical requests run the handler once and all get the same answer", async () => {
    const h = await harness({ gated: true });
    const tc = { chatId: newChat(), message: 3, id: "c" };
    const all = Array.from({ length: 8 }, () => call(h.url, tc));
    await until(() => h.runs.length === 1);
    await new Promise((r) => setTimeout(r, 50));
    await h.release();
    const answers = await Promise.all(all);
    expect(h.runs).toHaveLength(1);
    for (const a of answers) expect(a.json()).toEqual({ n: 1 });
  });

  it("input mismatch answers at once, without waiting for the pending run", async () => {
    const h = await harness({ gated: true });
    const tc = { chatId: newChat(), message: 3, id: "c" };
    const first = call(h.url, tc, { x: 1 });
    await until(() => h.runs.length === 1);
    const other = [
      () => call(h.url, tc, { x: 2 }),
      () => rawRequest(h.url, { path: "/act?q=2", headers: tcHeaders(tc), body: { x: 1 } }),
      () => rawRequest(h.url, { path: "/act", headers: tcHeaders(tc), body: { x: 1 } }),
      () =>
        rawRequest(h.url, {
          path: "/act?q=1",
          method: "PUT",
          headers: tcHeaders(tc),
          body: { x: 1 },
        }),
    ];
    for (const send of other) {
      const res = await send();
      expect(res.status).toBe(409);
      expect(res.json()).toEqual({
        message: "The request differs from the recorded request for this tool call.",
        code: "input_mismatch",
      });
    }
    await h.release();
    expect((await first).status).toBe(200);
  });

  it("input mismatch on another path: the same tool call sent to another route runs nothing", async () => {
    const h = await harness();
    const tc = { chatId: newChat(), message: 3, id: "c" };
    await call(h.url, tc);
    const res = await rawRequest(h.url, {
      path: "/act2?q=1",
      headers: tcHeaders(tc),
      body: { x: 1 },
    });
    expect(res.status).toBe(409);
    expect(res.json()).toMatchObject({ code: "input_mismatch" });
    expect(h.runs).toHaveLength(1);
  });

  it("the input hash is SHA-256 of each part's UTF-8 bytes after its length as uint64 BE", () => {
    const part = (bytes: Buffer) => {
      const len = Buffer.alloc(8);
      len.writeBigUInt64BE(BigInt(bytes.length));
      return Buffer.concat([len, bytes]);
    };
    const body = Buffer.from('{"command":"true"}');
    const expected = createHash("sha256")
      .update(part(Buffer.from("POST")))
      .update(part(Buffer.from("/api/é%2F")))
      .update(part(Buffer.from("x=1&y")))
      .update(part(body))
      .digest();
    expect(inputHash("POST", "/api/é%2F?x=1&y", body).equals(expected)).toBe(true);
  });

  it("the input hash covers method, raw path, raw query and body, each length-prefixed", () => {
    const base = inputHash("POST", "/a/b?x=1", Buffer.from("{}"));
    expect(inputHash("PUT", "/a/b?x=1", Buffer.from("{}")).equals(base)).toBe(false);
    expect(inputHash("POST", "/a/c?x=1", Buffer.from("{}")).equals(base)).toBe(false);
    expect(inputHash("POST", "/a/b?x=2", Buffer.from("{}")).equals(base)).toBe(false);
    expect(inputHash("POST", "/a/b?x=1", Buffer.from("[]")).equals(base)).toBe(false);
    // Not decoded: %2F and / are different paths.
    expect(
      inputHash("POST", "/a%2Fb?x=1", Buffer.from("{}")).equals(
        inputHash("POST", "/a/b?x=1", Buffer.from("{}")),
      ),
    ).toBe(false);
    // Length prefixes keep the boundary: path "/ab" + query "" differs from path "/a" + query "b".
    expect(
      inputHash("POST", "/ab", Buffer.alloc(0)).equals(inputHash("POST", "/a?b", Buffer.alloc(0))),
    ).toBe(false);
    expect(inputHash("POST", "/a/b?x=1", Buffer.from("{}")).equals(base)).toBe(true);
  });

  it("a waiter whose client leaves writes nothing; the run goes on", async () => {
    const h = await harness({ gated: true });
    const tc = { chatId: newChat(), message: 3, id: "c" };
    const ac = new AbortController();
    const leaving = rawRequest(h.url, {
      path: "/act?q=1",
      headers: tcHeaders(tc),
      body: { x: 1 },
      signal: ac.signal,
    });
    await until(() => h.runs.length === 1);
    ac.abort();
    await expect(leaving).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 30));
    await h.release();
    await new Promise((r) => setTimeout(r, 30));
    expect(h.sends()).toBe(0);
    const replay = await call(h.url, tc);
    expect(replay.json()).toEqual({ n: 1 });
    expect(h.runs).toHaveLength(1);
  });

  it("a published answer wins over a client that went away", async () => {
    const record = new ToolCallRecord("", 0, false);
    record.publish(jsonAnswer(200, { done: true }));
    const request = { raw: { destroyed: true } } as unknown as AgentRequest;
    const res = {
      destroyed: true,
      once: () => undefined,
      off: () => undefined,
    } as unknown as AgentResponse;
    expect((await waitForRecord(record, request, res))?.status).toBe(200);
  });

  it("an answer with no Content-Type is sent and replayed without one, its bytes exact", async () => {
    const h = await harness({
      run: () => Promise.resolve({ status: 201, contentType: "", body: Buffer.from([0, 255]) }),
    });
    const tc = { chatId: newChat(), message: 2, id: "c" };
    for (const res of [await call(h.url, tc), await call(h.url, tc)]) {
      expect(res.status).toBe(201);
      expect(headerValues(res, "content-type")).toEqual([]);
      expect([...res.body]).toEqual([0, 255]);
    }
    expect(h.runs).toHaveLength(1);
  });

  it("a throwing handler is recorded as 500 and never runs again", async () => {
    const h = await harness({
      run: () => Promise.reject(new Error("boom")),
    });
    const tc = { chatId: newChat(), message: 3, id: "c" };
    const first = await call(h.url, tc);
    const again = await call(h.url, tc);
    for (const res of [first, again]) {
      expect(res.status).toBe(500);
      expect(res.json()).toEqual({ message: "The tool call handler failed." });
    }
    expect(h.runs).toHaveLength(1);
  });

  it("a pending record dropped by a newer message still wakes its waiters", async () => {
    const h = await harness({ gated: true });
    const chatId = newChat();
    const old = { chatId, message: 5, id: "c" };
    const a = call(h.url, old);
    await until(() => h.runs.length === 1);
    const waiter = call(h.url, old);
    await new Promise((r) => setTimeout(r, 30));
    const newer = call(h.url, { chatId, message: 6, id: "c" });
    await until(() => h.runs.length === 2);
    expect(h.store.current({ chatId, messageId: 5n as never, toolCallId: Buffer.from("c") })).toBe(
      false,
    );
    await h.release();
    await h.release();
    expect((await a).json()).toEqual({ n: 2 });
    expect((await waiter).json()).toEqual({ n: 2 });
    expect((await newer).status).toBe(200);
    const stale = await call(h.url, old);
    expect(stale.status).toBe(409);
    expect(stale.json()).toMatchObject({ code: "stale_tool_call" });
  });

  it("cancel waits for a pending run, then answers its recorded response", async () => {
    const h = await harness({ gated: true });
    const tc = { chatId: newChat(), message: 3, id: "c" };
    const start = call(h.url, tc);
    await until(() => h.runs.length === 1);
    let answered = false;
    const cancel = rawRequest(h.url, {
      path: `/api/v0/tool-calls/${tcUuid(tc)}/cancel`,
      headers: tcHeaders(tc),
      body: { stop_if_run_age_below_ms: 1_000 },
    }).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(answered).toBe(false);
    h.clock.advance(400);
    await h.release();
    const res = await cancel;
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({
      started: true,
      status_code: 200,
      content_type: "application/json",
      body: Buffer.from(JSON.stringify({ n: 1 })).toString("base64"),
    });
    expect(headerValues(res, RUN_AGE_HEADER)).toEqual(["400"]);
    expect(h.stops).toEqual([tcUuid(tc)]);
    expect((await start).status).toBe(200);
  });

  it("a refusal for an agent started after the call is a coded 409", async () => {
    const h = await harness();
    const res = await call(h.url, { chatId: newChat(), message: 1, id: "c", ageMs: 58_000 });
    expect(res.status).toBe(409);
    expect(res.json()).toEqual({
      message: "The workspace agent started after the tool call was committed.",
      code: "agent_started_after_tool_call",
    });
    expect(h.runs).toHaveLength(0);
  });
});
