import http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AgentClient } from "./client.ts";
import { AgentTimeoutError, type AgentRequestRecord, type ToolCall } from "./exchange.ts";
import type { Clock } from "./clock.ts";
import { AgentHttpError, ToolCallError } from "./errors.ts";
import { AgentConnectionError } from "./transport.ts";
import { parseChatId, toMessageId } from "./ids.ts";

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

const servers: http.Server[] = [];
const clients: AgentClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise((r) => s.close(r));
    }),
  );
});

async function serve(handler: Handler): Promise<string> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, res, Buffer.concat(chunks)));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

function client(baseUrl: string, clock?: Clock): AgentClient {
  const c = new AgentClient({ baseUrl, ...(clock && { clock }) });
  clients.push(c);
  return c;
}

function json(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string | string[]> = {},
) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

const TC: ToolCall = {
  chatId: parseChatId("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")!,
  messageId: toMessageId(42)!,
  toolCallId: "toolu_01/%x y",
  ageMs: 1_000,
};

describe("agent client", () => {
  it("sends the tool call headers with the age plus the time spent connecting", async () => {
    let seen: http.IncomingHttpHeaders = {};
    const url = await serve((req, res) => {
      seen = req.headers;
      json(res, 200, { id: "x", started: true }, { "Coder-Tool-Call-Run-Age-Ms": "1500" });
    });
    // A clock that moves 250 ms between any two readings: connecting "takes" 250 ms.
    let t = 0;
    const stepping: Clock = {
      now: () => (t += 250),
      setTimer: () => ({ cancel: () => undefined }),
    };
    const res = await client(url, stepping).startProcess({ command: "true" }, { toolCall: TC });
    expect(seen["coder-chat-id"]).toBe("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
    expect(seen["coder-tool-call-message-id"]).toBe("42");
    expect(seen["coder-tool-call-id"]).toBe("toolu_01%2F%25x%20y");
    expect(seen["coder-tool-call-age-ms"]).toBe("1250");
    expect(res.runAgeMs).toBe(1500);
  });

  it("requests without a tool call carry no tool call headers", async () => {
    let seen: http.IncomingHttpHeaders = {};
    const url = await serve((req, res) => {
      seen = req.headers;
      json(res, 200, { id: "x", started: true });
    });
    const res = await client(url).startProcess({ command: "true" });
    expect(seen["coder-tool-call-id"]).toBeUndefined();
    expect(seen["coder-tool-call-age-ms"]).toBeUndefined();
    expect(res.runAgeMs).toBe(0);
  });

  it("a repeated or malformed run age header reads as 0", async () => {
    const url = await serve((_req, res) =>
      json(res, 200, { id: "x", started: true }, { "Coder-Tool-Call-Run-Age-Ms": ["5", "6"] }),
    );
    expect((await client(url).startProcess({ command: "true" }, { toolCall: TC })).runAgeMs).toBe(
      0,
    );
  });

  it("decodes coded 409s into ToolCallError and everything else into AgentHttpError", async () => {
    const url = await serve((req, res) => {
      if (req.url === "/api/v0/processes/start")
        json(res, 409, { message: "m", code: "tool_call_canceled" });
      else json(res, 409, { message: "Process is not running.", code: "something_else" });
    });
    const c = client(url);
    const coded = await c
      .startProcess({ command: "true" }, { toolCall: TC })
      .catch((e: unknown) => e);
    expect(coded).toBeInstanceOf(ToolCallError);
    expect(coded).toMatchObject({ code: "tool_call_canceled" });
    const generic = await c.signalProcess("p", "kill").catch((e: unknown) => e);
    expect(generic).toBeInstanceOf(AgentHttpError);
    expect(generic).toMatchObject({ status: 409, message: "Process is not running." });
  });

  it("refuses redirects", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(302, { location: "/elsewhere" });
      res.end();
    });
    await expect(client(url).info()).rejects.toBeInstanceOf(AgentHttpError);
  });

  it("an unreachable agent is a connection error in the connect phase", async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const c = client(`http://127.0.0.1:${port}`);
    await expect(c.startProcess({ command: "true" }, { toolCall: TC })).rejects.toMatchObject({
      name: "AgentConnectionError",
      phase: "connect",
    });
    await expect(c.info()).rejects.toBeInstanceOf(AgentConnectionError);
  });

  it("a silent agent ends in a timeout; an abort signal ends the wait with its reason", async () => {
    const url = await serve(() => undefined); // never answers
    const c = client(url);
    await expect(c.info({ timeoutMs: 100 })).rejects.toBeInstanceOf(AgentTimeoutError);
    const ac = new AbortController();
    const pending = c.startProcess({ command: "true" }, { toolCall: TC }, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("stop waiting")), 50);
    await expect(pending).rejects.toThrow("stop waiting");
  });

  it("a connection cut mid-answer is a connection error in the exchange phase", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write("{");
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await expect(client(url).info()).rejects.toMatchObject({
      name: "AgentConnectionError",
      phase: "exchange",
    });
  });

  it("the observer sees each request once: its route template, status, duration and tool call", async () => {
    const url = await serve((req, res) => {
      if (req.url?.startsWith("/api/v0/processes/a%2Fb/output")) {
        json(res, 404, { message: "Process not found." });
      } else json(res, 200, { id: "x", started: true });
    });
    const seen: AgentRequestRecord[] = [];
    const c = new AgentClient({
      baseUrl: url,
      onRequest: (r) => {
        seen.push(r);
        throw new Error("an observer that throws changes nothing");
      },
    });
    clients.push(c);
    await c.startProcess({ command: "true" }, { toolCall: TC });
    await expect(c.processOutput("a/b", { chatId: TC.chatId })).rejects.toBeInstanceOf(
      AgentHttpError,
    );
    expect(seen).toEqual([
      {
        route: "POST /api/v0/processes/start",
        durationMs: expect.any(Number) as number,
        status: 200,
        aborted: false,
        toolCall: TC,
        chatId: TC.chatId,
      },
      {
        route: "GET /api/v0/processes/{id}/output",
        durationMs: expect.any(Number) as number,
        status: 404,
        aborted: false,
        chatId: TC.chatId,
      },
    ]);
    expect(seen[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("the observer tells a failed request from one the caller stopped waiting for", async () => {
    const url = await serve(() => undefined); // never answers
    const seen: AgentRequestRecord[] = [];
    const c = new AgentClient({ baseUrl: url, onRequest: (r) => seen.push(r) });
    clients.push(c);
    await expect(c.info({ timeoutMs: 50 })).rejects.toBeInstanceOf(AgentTimeoutError);
    const ac = new AbortController();
    const pending = c.cancelToolCall(TC, 0, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("stop waiting")), 20);
    await expect(pending).rejects.toThrow("stop waiting");
    expect(seen).toMatchObject([
      { route: "GET /api/v0/info", aborted: false, error: expect.any(AgentTimeoutError) },
      { route: "POST /api/v0/tool-calls/{id}/cancel", aborted: true, toolCall: TC },
    ]);
    expect(seen.map((r) => r.status)).toEqual([undefined, undefined]);
    expect(seen[0]!.durationMs).toBeGreaterThanOrEqual(40);
  });
});
