// The benchmarks' model server in a process of its own, as a provider is: the fake provider
// server (test/support/fake-provider.ts, the provider's real HTTP protocol) answering each
// request with one execute of `true` until the conversation holds `steps` tool results
// (argv[2], default 1), then text. Prints `listening on <url>`.

import { startFakeProvider, type FakeChatRequest } from "../test/support/fake-provider.ts";

const steps = Number(process.argv[2] ?? 1);
const fake = await startFakeProvider();
fake.respond((req: FakeChatRequest) =>
  req.messages.filter((m) => m.role === "tool").length >= steps
    ? { text: "done" }
    : { toolCalls: [{ name: "execute", args: { command: "true" } }] },
);
console.log(`listening on ${fake.url}`);
process.once("SIGTERM", () => void fake.close().finally(() => process.exit(0)));
