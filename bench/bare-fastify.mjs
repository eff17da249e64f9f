// The baseline of the replay benchmark: a bare Fastify route that answers a constant. Plain
// JavaScript run by plain node.

import Fastify from "fastify";

const app = Fastify({ logger: false });
const answer = JSON.stringify({ id: "00000000-0000-0000-0000-000000000000", started: true });
app.post("/api/v0/processes/start", (_req, reply) =>
  reply.header("content-type", "application/json").send(answer),
);
const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`listening on ${url}\n`);
process.once("SIGTERM", () => void app.close().then(() => process.exit(0)));
