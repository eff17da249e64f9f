// The contract over the dial-out connection: the agent and tool tests that speak to one agent
// (its routes, headers, bodies, status codes, run ages, clients that go away, the tools' results)
// run again here with every agent dialling out, so both transports pass the same tests.

import { agentTransport } from "../support/agent.ts";

agentTransport.kind = "dialout";
await import("./processes.test.ts");
await import("./cancel.test.ts");
await import("./files.test.ts");
await import("../../src/chatd/tools/execute.test.ts");
await import("../../src/chatd/tools/files.test.ts");
await import("../../src/chatd/tools/interrupt.test.ts");
