// GET /metrics: this replica's metrics in the Prometheus text format. It needs no token, like
// health: it tells counts and durations, never a chat's content, a user or a secret.

import type { FastifyInstance } from "fastify";
import { EXPOSITION_CONTENT_TYPE } from "../metrics/index.ts";
import type { ApiContext } from "./context.ts";

export function metricsRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const registry = ctx.metrics;
  if (!registry) return;
  app.get("/metrics", async (_request, reply) =>
    reply.type(EXPOSITION_CONTENT_TYPE).send(await registry.render()),
  );
}
