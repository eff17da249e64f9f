// The contract over the dial-out connection: the agent and tool tests that speak to one agent
// (its routes, headers, bodies, status codes, run ages, clients that go away, the tools' results)
// run again here with every agent dialling out, so both transports pass the same tests. The
// hooks read headers from `rawHeaders` (HTTP/2's compat request has no `headersDistinct`), so
// repeats stay apart over HTTP/2 too.

import { describe, expect, it } from "vitest";
import { agentTransport, useAgents } from "../support/agent.ts";
import { rawRequest } from "../support/http.ts";
import { newChat, tcHeaders } from "../support/toolcall.ts";

agentTransport.kind = "dialout";
await import("./processes.test.ts");
await import("./cancel.test.ts");
await import("./files.test.ts");
await import("./context.test.ts");
await import("../../src/chatd/tools/execute.test.ts");
await import("../../src/chatd/tools/files.test.ts");
await import("../../src/chatd/tools/interrupt.test.ts");

const startAgent = useAgents();

describe("headers over the dial-out connection", () => {
  it("a repeated Coder-Chat-Id is 400, and so is a repeated tool call header", async () => {
    const agent = await startAgent();
    const id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    const chat = await rawRequest(agent.url, {
      path: "/api/v0/processes/list",
      headers: { "Coder-Chat-Id": [id, id] },
    });
    expect(chat.status).toBe(400);
    expect(chat.json()).toMatchObject({ detail: "invalid Coder-Chat-Id header: multiple values" });
    const chatId = newChat();
    const h = tcHeaders({ chatId, message: 1, id: "x" });
    const tool = await rawRequest(agent.url, {
      path: "/api/v0/processes/start",
      headers: { ...h, "Coder-Tool-Call-Age-Ms": ["0", "0"] },
      body: { command: "true" },
    });
    expect(tool.status).toBe(400);
    expect(tool.json()).toMatchObject({
      detail: "invalid Coder-Tool-Call-Age-Ms header: multiple values",
    });
    expect(agent.allProcesses()).toHaveLength(0);
  });
});
