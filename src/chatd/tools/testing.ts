// Test helpers for the tools: a tool context with defaults, and tiny fake agents (node:http)
// that record every request, for the answers a real agent never gives (silence, foreign IDs).

import http from "node:http";
import type net from "node:net";
import { afterEach } from "vitest";
import {
  AgentClient,
  parseChatId,
  realClock,
  toMessageId,
  toolCallUuid,
  type ChatId,
  type ToolCallUuid,
} from "../../contract/index.ts";
import type { ToolContext } from "./context.ts";
import { randomUUID } from "node:crypto";

export function newChatId(): ChatId {
  return parseChatId(randomUUID())!;
}

/** A context for `client` with a fresh chat, message 1, age 0, real time and no abort. */
export function toolContext(client: AgentClient, o: Partial<ToolContext> = {}): ToolContext {
  return {
    client,
    chatId: newChatId(),
    messageId: toMessageId(1)!,
    toolCallAgeMs: 0,
    clock: realClock,
    agentAnswerTimeoutMs: 5_000,
    signal: new AbortController().signal,
    ...o,
  };
}

export function uuidFor(ctx: ToolContext, toolCallId: string): ToolCallUuid {
  return toolCallUuid(ctx.chatId, ctx.messageId, toolCallId);
}

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type FakeHandler = (req: RecordedRequest, res: http.ServerResponse) => void;

export interface FakeAgent {
  url: string;
  client: AgentClient;
  requests: RecordedRequest[];
}

export function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** For a test file: fake agents (and a closed port), all closed after each test. */
export function useFakeAgents(): {
  fake: (handler: FakeHandler) => Promise<FakeAgent>;
  closedPort: () => Promise<string>;
} {
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
  const listen = async (server: http.Server) => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  };
  return {
    async fake(handler) {
      const requests: RecordedRequest[] = [];
      const server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          const r: RecordedRequest = {
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          };
          requests.push(r);
          handler(r, res);
        });
      });
      servers.push(server);
      const url = await listen(server);
      const client = new AgentClient({ baseUrl: url });
      clients.push(client);
      return { url, client, requests };
    },
    async closedPort() {
      const server = http.createServer();
      const url = await listen(server);
      await new Promise((r) => server.close(r));
      return url;
    },
  };
}
