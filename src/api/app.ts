// The public HTTP API (API.md): one Fastify instance with the bearer check in front of every
// route but the public ones, the `{message, detail?}` error shape for everything that fails,
// and the route groups, and the internal routes between replicas (relay.ts). Closing it ends
// open event streams and stops listening for changes.

import Fastify, { LogController, type FastifyInstance } from "fastify";
import { AgentPool } from "../chatd/agents.ts";
import { agentConnectRoutes } from "./agent-connect.ts";
import { ephemeralSecretBox } from "../chatd/secrets/index.ts";
import { auditRoutes } from "./audit.ts";
import { authenticate, authRoutes } from "./auth.ts";
import { ChatChanges } from "./changes.ts";
import type { ApiContext, ApiOptions } from "./context.ts";
import { chatRoutes } from "./chats.ts";
import { promptRoutes } from "./prompt.ts";
import { answerMalformedRequest } from "../contract/malformed-request.ts";
import { ApiError, errorBody, handleError, refuseUnstorableInput } from "./errors.ts";
import { metricsRoutes } from "./metrics.ts";
import { modelRoutes } from "./models.ts";
import { openApiRoutes, ROUTES } from "./openapi.ts";
import { processRoutes } from "./processes.ts";
import { internalRoutes } from "./relay.ts";
import { MessageFeed } from "../chatd/message-feed.ts";
import { streamRoutes } from "./stream.ts";
import { TokenCache } from "./token-cache.ts";
import { templateRoutes } from "./templates.ts";
import { tokenRoutes } from "./tokens.ts";
import { usageRoutes } from "./usage.ts";
import { userRoutes } from "./users.ts";
import { webRoutes } from "./web.ts";
import { workspaceRoutes } from "./workspaces.ts";

/** Largest request body the API takes. */
export const API_BODY_LIMIT_BYTES = 1024 * 1024;

/** JSON.parse that refuses prototype poisoning (`__proto__`, `constructor.prototype`). */
function parseJson(text: string): unknown {
  return JSON.parse(text, (key, value: unknown) => {
    const poisoned =
      key === "__proto__" ||
      (key === "constructor" &&
        typeof value === "object" &&
        value !== null &&
        "prototype" in value);
    if (poisoned)
      throw ApiError.coded("invalid_body", "The request body must not set an object's prototype.");
    return value;
  });
}

/**
 * Sent with every answer, the UI's and the API's alike (event streams too): scripts, styles,
 * images and requests only from this origin (the built UI has no inline script or style), no
 * framing by any page, no content-type sniffing, no Referer to other sites.
 */
export const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
    "frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/**
 * Routes parse their input with zod in the handler (errors.ts `parse`) and declare no Fastify
 * schema, so Fastify's default compilers (ajv and fast-json-stringify, which it loads at every
 * start: about 30 ms of CPU here) are never needed. These refuse a schema.
 */
const NO_FASTIFY_SCHEMAS = {
  compilersFactory: {
    buildValidator: () => () => {
      throw new Error("API routes parse their input with zod (errors.ts parse), not a schema.");
    },
    buildSerializer: () => () => {
      throw new Error("API routes send plain JSON; a response schema is not supported.");
    },
  },
};

export async function createApi(o: ApiOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(o.log
      ? {
          loggerInstance: o.log,
          logController: new LogController({ disableRequestLogging: true }),
        }
      : { logger: false }),
    bodyLimit: API_BODY_LIMIT_BYTES,
    trustProxy: o.trustProxy ?? false,
    schemaController: NO_FASTIFY_SCHEMAS,
    clientErrorHandler: (err, socket) =>
      answerMalformedRequest(err, socket, (m) => errorBody(m.code, m.message)),
  });
  const secrets = o.secrets ?? o.agents?.secrets ?? ephemeralSecretBox();
  const ctx: ApiContext = {
    ...o,
    changes: new ChatChanges(o.db),
    streams: new Set(),
    feed: o.feed ?? new MessageFeed(o.clock),
    tokens: new TokenCache(o.db, o.clock),
    agents:
      o.agents ??
      new AgentPool(o.db, {
        secrets,
        ...(o.memberAgentAddresses && { memberAgentAddresses: o.memberAgentAddresses }),
      }),
    secrets,
  };

  // Bodies are JSON only: any other type (text/plain, a form) is a 415, so a cross-site form
  // cannot even be parsed. An empty JSON body is no body (a bodiless POST from a client that
  // always sets the type).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    try {
      done(null, text.trim() === "" ? undefined : parseJson(text));
    } catch (err) {
      done(
        err instanceof ApiError
          ? err
          : ApiError.coded("invalid_body", "The request body is not valid JSON."),
      );
    }
  });
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(async (request) => {
    throw new ApiError(404, `No route ${request.method} ${request.url.split("?")[0]}.`);
  });
  app.addHook("onRequest", async (request, reply) => {
    void reply.headers(SECURITY_HEADERS);
    await authenticate(ctx, request);
  });
  // Text the database cannot store is refused here, once for every route (errors.ts).
  app.addHook("preValidation", async (request) => refuseUnstorableInput(request));
  // Every public route is in the OpenAPI document: one without an entry fails at start-up.
  app.addHook("onRoute", (r) => {
    if (!r.url.startsWith("/api/")) return;
    for (const method of [r.method].flat()) {
      if (method !== "HEAD" && !(`${method} ${r.url}` in ROUTES))
        throw new Error(`${method} ${r.url} has no entry in src/api/openapi.ts ROUTES.`);
    }
  });
  app.addHook("preClose", async () => {
    for (const close of [...ctx.streams]) close();
  });
  app.addHook("onClose", async () => {
    await ctx.changes.close();
    await ctx.tokens.close();
    // A pool that was given belongs to its giver (the worker may still be using it).
    if (!o.agents) ctx.agents.close();
  });

  app.get("/api/v1/health", async () => ({ status: "ok" }));
  metricsRoutes(app, ctx);
  authRoutes(app, ctx);
  userRoutes(app, ctx);
  tokenRoutes(app, ctx);
  workspaceRoutes(app, ctx);
  templateRoutes(app, ctx);
  modelRoutes(app, ctx);
  chatRoutes(app, ctx);
  promptRoutes(app, ctx);
  processRoutes(app, ctx);
  streamRoutes(app, ctx);
  usageRoutes(app, ctx);
  auditRoutes(app, ctx);
  openApiRoutes(app, ctx);
  webRoutes(app, ctx);
  internalRoutes(app, ctx);
  agentConnectRoutes(app, ctx);

  await app.ready();
  return app;
}
