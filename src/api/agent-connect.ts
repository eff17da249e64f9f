// Where dial-out agents come in: the HTTP/1.1 upgrade of `GET /api/v1/agents/connect`, taken
// off the API's server before Fastify sees it, authenticated by the agent token (only its hash
// is stored), then handed to this replica's AgentHub, which answers 101 and holds the
// connection. And the internal route through which other replicas drive the agents this one
// holds (the replica secret, checked by the bearer hook like every internal route).

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyInstance } from "fastify";
import {
  AGENT_CONNECT_CODES,
  AGENT_CONNECT_PATH,
  AGENT_INSTANCE_HEADER,
  AGENT_UPGRADE_PROTOCOL,
  AGENT_UPTIME_HEADER,
  realClock,
} from "../contract/index.ts";
import {
  AGENT_RELAY_BODY_LIMIT_BYTES,
  refuseAgentUpgrade,
  serveRelayedExchange,
} from "../chatd/dialout/index.ts";
import { agentTokenFor } from "../workspaces/agent-tokens.ts";
import type { ApiContext } from "./context.ts";
import { IdParams, parse } from "./errors.ts";

/** Largest uptime an agent may report: about 292 years. */
const MAX_UPTIME_MS = 9_223_372_036_854;

export function agentConnectRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => undefined);
    handshake(ctx, req, socket, head).catch((err: unknown) => {
      ctx.log?.warn({ err }, "agent handshake failed");
      if (!socket.destroyed)
        refuseAgentUpgrade(socket, 503, AGENT_CONNECT_CODES.unavailable, "Dial again.");
    });
  });

  // The replica secret was checked by the onRequest hook (auth.ts).
  app.register(async (scoped) => {
    scoped.addContentTypeParser(
      "application/octet-stream",
      { parseAs: "buffer", bodyLimit: AGENT_RELAY_BODY_LIMIT_BYTES },
      (_request, body, done) => done(null, body),
    );
    scoped.post(
      "/internal/v1/agents/:id/exchange",
      { bodyLimit: AGENT_RELAY_BODY_LIMIT_BYTES },
      async (request, reply) => {
        const enteredAt = realClock.now();
        const { id } = parse(IdParams, request.params, "path");
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        reply.hijack();
        await serveRelayedExchange(ctx.agentHub?.localSession(id), request.raw, body, reply.raw, {
          enteredAt,
        });
      },
    );
  });
}

async function handshake(
  ctx: ApiContext,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  const path = (req.url ?? "").split("?")[0];
  if (path !== AGENT_CONNECT_PATH)
    return refuseAgentUpgrade(socket, 404, "not_found", `No upgrade at ${path}.`);
  if (req.headers.upgrade?.toLowerCase() !== AGENT_UPGRADE_PROTOCOL)
    return refuseAgentUpgrade(socket, 400, "bad_upgrade", `Upgrade to ${AGENT_UPGRADE_PROTOCOL}.`);
  const hub = ctx.agentHub;
  if (!hub)
    return refuseAgentUpgrade(socket, 404, "not_found", "This server takes no dial-out agents.");
  const m = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
  const token = m ? await agentTokenFor(ctx.db, m[1]!) : undefined;
  if (!token) {
    return refuseAgentUpgrade(
      socket,
      401,
      AGENT_CONNECT_CODES.unauthorized,
      "The agent token is unknown or revoked.",
    );
  }
  const uptime = req.headers[AGENT_UPTIME_HEADER];
  if (typeof uptime !== "string" || !/^[0-9]+$/.test(uptime) || Number(uptime) > MAX_UPTIME_MS) {
    return refuseAgentUpgrade(
      socket,
      400,
      "bad_uptime",
      `Send ${AGENT_UPTIME_HEADER}: the agent's uptime in whole milliseconds.`,
    );
  }
  const instance = req.headers[AGENT_INSTANCE_HEADER];
  await hub.accept(socket, head, {
    workspaceId: token.workspaceId,
    tokenId: token.tokenId,
    uptimeMs: Number(uptime),
    instance: typeof instance === "string" && instance.length <= 200 ? instance : "unknown",
  });
}
