import { APICallError } from "@ai-sdk/provider";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { boundedFetch, httpFetch } from "./http-fetch.ts";
import { streamStep } from "./step.ts";

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((r) => {
          s.closeAllConnections();
          s.close(() => r());
        }),
    ),
  );
});

async function serve(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function readAll(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = "";
    req.on("data", (c: Buffer) => (s += c.toString()));
    req.on("end", () => resolve(s));
  });
}

/** A port nothing listens on: a server's, closed. */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe("httpFetch", () => {
  it("sends the method, headers and body, and answers status, headers and body", async () => {
    let seen: { method?: string; headers?: http.IncomingHttpHeaders; body?: string } = {};
    const url = await serve((req, res) => {
      void readAll(req).then((body) => {
        seen = { method: req.method, headers: req.headers, body };
        res.writeHead(201, "Made", { "x-answer": "42", "content-type": "application/json" });
        res.end('{"ok":true}');
      });
    });
    const res = await httpFetch(`${url}/v1/x?q=1`, {
      method: "POST",
      headers: { "Content-Type": "application/json", authorization: "Bearer k" },
      body: '{"héllo":1}',
    });
    expect(seen.method).toBe("POST");
    expect(seen.headers?.["content-type"]).toBe("application/json");
    expect(seen.headers?.authorization).toBe("Bearer k");
    expect(seen.headers?.["content-length"]).toBe(String(Buffer.byteLength('{"héllo":1}')));
    expect(seen.body).toBe('{"héllo":1}');
    expect(res.status).toBe(201);
    expect(res.statusText).toBe("Made");
    expect(res.ok).toBe(true);
    expect(res.headers.get("x-answer")).toBe("42");
    expect(await res.json()).toEqual({ ok: true });
  });

  it("streams the body as it arrives, not once it ended", async () => {
    let second!: () => void;
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: one\n\n");
      second = () => res.end("data: two\n\n");
    });
    const res = await httpFetch(url, { method: "POST", body: "{}" });
    const reader = res.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: one\n\n");
    second();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += new TextDecoder().decode(r.value);
    expect(rest).toBe("data: two\n\n");
  });

  it("answers an error status with its body, as fetch does", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(429, { "retry-after": "3" });
      res.end('{"error":{"message":"slow down"}}');
    });
    const res = await httpFetch(url, { method: "POST", body: "{}" });
    expect(res.ok).toBe(false);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("3");
    expect(await res.text()).toBe('{"error":{"message":"slow down"}}');
  });

  it("rejects a request that gets no answer with fetch's TypeError and the cause", async () => {
    const port = await closedPort();
    const err: unknown = await httpFetch(`http://127.0.0.1:${port}/v1`, {
      method: "POST",
      body: "{}",
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as TypeError).message).toBe("fetch failed");
    expect(((err as TypeError).cause as NodeJS.ErrnoException).code).toBe("ECONNREFUSED");
  });

  it("errors the body when the connection ends before the body did", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-length": "100" });
      res.write("partial");
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const res = await httpFetch(url, { method: "POST", body: "{}" });
    const err = await res.text().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as TypeError).message).toBe("terminated");
  });

  it("aborts: the request with the signal's reason, and a body being read", async () => {
    let closed!: Promise<void>;
    const url = await serve((req, res) => {
      closed = new Promise((r) => req.socket.once("close", () => r()));
      res.writeHead(200);
      res.write("first");
    });
    const before = new AbortController();
    before.abort(new Error("not wanted"));
    await expect(httpFetch(url, { signal: before.signal })).rejects.toThrow("not wanted");

    const ac = new AbortController();
    const res = await httpFetch(url, { method: "POST", body: "{}", signal: ac.signal });
    const reader = res.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    await reader.read();
    ac.abort(new Error("user stopped"));
    await expect(reader.read()).rejects.toThrow("user stopped");
    await closed; // the server saw the connection go
  });

  it("decodes a compressed body", async () => {
    const url = await serve((req, res) => {
      res.writeHead(200, { "content-encoding": "gzip" });
      res.end(gzipSync(`zipped ${req.url}`));
    });
    expect(await (await httpFetch(`${url}/z`)).text()).toBe("zipped /z");
  });

  it("follows a redirect within the origin as fetch does, sending each request once", async () => {
    const seen: string[] = [];
    const url = await serve((req, res) => {
      void readAll(req).then((body) => {
        seen.push(`${req.method} ${req.url} ${body} ${String(req.headers["x-api-key"])}`);
        const to: Record<string, [number, string]> = {
          "/keep": [307, "/kept"],
          "/see": [303, "/seen"],
          "/moved": [302, "/kept"],
        };
        const hop = to[req.url ?? ""];
        if (hop) res.writeHead(hop[0], { location: hop[1] });
        res.end(hop ? "" : `at ${req.url}`);
      });
    });
    const post = (path: string) =>
      httpFetch(`${url}${path}`, { method: "POST", headers: { "x-api-key": "k" }, body: "{}" });
    expect(await (await post("/keep")).text()).toBe("at /kept");
    expect(await (await post("/see")).text()).toBe("at /seen");
    expect(await (await post("/moved")).text()).toBe("at /kept");
    // A 307 resends the POST with its body; a 303, and a 302 of a POST, ask with a GET.
    expect(seen).toEqual([
      "POST /keep {} k",
      "POST /kept {} k",
      "POST /see {} k",
      "GET /seen  k",
      "POST /moved {} k",
      "GET /kept  k",
    ]);
  });

  it("answers a redirect to another origin as it came: the key stays where it was sent", async () => {
    const elsewhere: string[] = [];
    const other = await serve((req, res) => {
      elsewhere.push(`${req.method} ${req.url}`);
      res.end("taken");
    });
    let asked = 0;
    const url = await serve((req, res) => {
      asked++;
      req.resume();
      res.writeHead(308, { location: `${other}/v1/chat/completions` });
      res.end();
    });
    const res = await httpFetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "x-api-key": "the-key" },
      body: "{}",
    });
    expect(res.status).toBe(308);
    expect(res.headers.get("location")).toBe(`${other}/v1/chat/completions`);
    expect(asked).toBe(1);
    expect(elsewhere).toEqual([]);
  });

  it("stops following after 20 redirects in a row, answering the last", async () => {
    let asked = 0;
    const url = await serve((req, res) => {
      asked++;
      req.resume();
      res.writeHead(307, { location: `/again${asked}` });
      res.end();
    });
    const res = await httpFetch(`${url}/`, { method: "POST", body: "{}" });
    expect(res.status).toBe(307);
    expect(asked).toBe(21);
  });

  it("keeps undici's bounds: no answer, a stalled body, a connection not made", async () => {
    const bounds = { connectMs: 300, quietMs: 200 };
    const url = await serve((req, res) => {
      if (req.url === "/silent") return; // never answers
      res.writeHead(200);
      res.write("first"); // then stalls
    });
    const silent: unknown = await boundedFetch(`${url}/silent`, {}, bounds).catch(
      (e: unknown) => e,
    );
    expect(silent).toBeInstanceOf(TypeError);
    expect(((silent as TypeError).cause as { code?: string }).code).toBe("UND_ERR_HEADERS_TIMEOUT");

    const stalled = await boundedFetch(`${url}/stalled`, {}, bounds);
    const err: unknown = await stalled.text().catch((e: unknown) => e);
    expect((err as TypeError).message).toBe("terminated");
    expect(((err as TypeError).cause as { code?: string }).code).toBe("UND_ERR_BODY_TIMEOUT");

    // A listener that never accepts, its queue full: the next connection is never made.
    const py = spawn("python3", [
      "-c",
      "import socket,sys,time\ns=socket.socket();s.bind(('127.0.0.1',0));s.listen(0)\n" +
        "print(s.getsockname()[1],flush=True);time.sleep(60)",
    ]);
    try {
      const port = await new Promise<number>((resolve) =>
        py.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))),
      );
      const fillers = Array.from({ length: 4 }, () => net.connect(port, "127.0.0.1"));
      fillers.forEach((f) => f.on("error", () => undefined));
      await new Promise((r) => setTimeout(r, 100));
      const refused: unknown = await boundedFetch(`http://127.0.0.1:${port}/`, {}, bounds).catch(
        (e: unknown) => e,
      );
      expect(((refused as TypeError).cause as { code?: string }).code).toBe(
        "UND_ERR_CONNECT_TIMEOUT",
      );
      fillers.forEach((f) => f.destroy());
    } finally {
      py.kill();
    }
  });

  it("carries a provider's step, and a refused connection reaches it as retryable", async () => {
    const url = await serve((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: "assistant", content: "Hel" }));
      res.write(chunk({ content: "lo" }, "stop"));
      res.end("data: [DONE]\n\n");
    });
    const model = (baseURL: string) =>
      createOpenAICompatible({ name: "t", baseURL, fetch: httpFetch }).chatModel("m");
    const request = { system: "s", messages: [], abortSignal: new AbortController().signal };
    let text = "";
    for await (const p of streamStep(model(`${url}/v1`), request))
      if (p.type === "text-delta") text += p.text;
    expect(text).toBe("Hello");

    const port = await closedPort();
    const parts = streamStep(model(`http://127.0.0.1:${port}/v1`), request);
    const err = await parts.next().catch((e: unknown) => e);
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).isRetryable).toBe(true);
    expect((err as APICallError).message).toMatch(/^Cannot connect to API/);
  });

  it("gives a provider a redirect elsewhere as a failure no retry changes", async () => {
    const url = await serve((req, res) => {
      req.resume();
      res.writeHead(307, { location: "http://127.0.0.1:1/v1/chat/completions" });
      res.end();
    });
    const model = createOpenAICompatible({
      name: "t",
      baseURL: `${url}/v1`,
      apiKey: "the-key",
      fetch: httpFetch,
    }).chatModel("m");
    const request = { system: "s", messages: [], abortSignal: new AbortController().signal };
    const err = await streamStep(model, request)
      .next()
      .catch((e: unknown) => e);
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(307);
    expect((err as APICallError).isRetryable).toBe(false);
    expect((err as APICallError).responseHeaders?.location).toBe(
      "http://127.0.0.1:1/v1/chat/completions",
    );
  });
});
