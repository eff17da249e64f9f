// The public HTTP API (API.md): one Fastify instance with the bearer check in front of every
// route but the public ones, the `{message, detail?}` error shape for everything that fails,
// and the route groups, and the internal routes between replicas (relay.ts). Closing it ends
// open event streams and stops listening for changes.

import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { AgentPool } from "../chatd/agents.ts";
import type { Database } from "../chatd/db/index.ts";
import type { Clock } from "../contract/index.ts";
import type { StreamBuffer } from "../chatd/stream.ts";
import type { Registry } from "../metrics/index.ts";
import { auditRoutes } from "./audit.ts";
import { authenticate, authRoutes, type ThrottleOptions } from "./auth.ts";
import { chatRoutes } from "./chats.ts";
import { ApiError, handleError } from "./errors.ts";
import { metricsRoutes } from "./metrics.ts";
import { modelRoutes } from "./models.ts";
import { openApiRoutes, ROUTES } from "./openapi.ts";
import { processRoutes } from "./processes.ts";
import { internalRoutes } from "./relay.ts";
import { ChatChanges, streamRoutes } from "./stream.ts";
import { tokenRoutes } from "./tokens.ts";
import { usageRoutes } from "./usage.ts";
import { userRoutes } from "./users.ts";
import { webRoutes } from "./web.ts";
import { workspaceRoutes } from "./workspaces.ts";

/** Largest request body the API takes. */
export const API_BODY_LIMIT_BYTES = 1024 * 1024;

export interface ApiOptions {
  /** Where users, tokens, chats and messages live. */
  db: Database;
  /** This replica's live parts, for the event streams. */
  buffer: StreamBuffer;
  /** Serves GET / (index.html) and the UI's files; without it, a page pointing to the API. */
  webRoot?: string;
  /** The default model config ID when a chat names none; null falls back to the `is_default` one. */
  defaultModelConfigId?: () => Promise<string | null>;
  /** The default workspace ID when a chat names none; null falls back to the `is_default` one. */
  defaultWorkspaceId?: () => Promise<string | null>;
  /**
   * This process as one of several replicas: its worker ID (a stream on a chat owned by another
   * worker relays the owner's live parts) and the secret replicas show each other. Without it
   * the API serves its own buffer's parts only and refuses every internal route.
   */
  replica?: { workerId: string; secret: string };
  /** This replica's metrics, served without a token at GET /metrics. */
  metrics?: Registry;
  /**
   * Where the API logs what goes wrong (a 500's cause, a failed stream or relay); requests
   * themselves are not logged. Silent by default.
   */
  log?: FastifyBaseLogger;
  /** Login throttling (auth.ts), overridable by tests: a small delay, their own clock. */
  loginThrottle?: Partial<ThrottleOptions>;
  /**
   * Trust X-Forwarded-For/-Proto from a reverse proxy (Fastify's trustProxy): the audit log's
   * client address, login throttling per address and the session cookie's Secure flag follow
   * them. Off by default: only set it when a proxy in front strips those headers from clients.
   */
  trustProxy?: boolean;
  /** Bound on a workspace health check (`GET /api/v0/info` of its agent); 2 s by default. */
  healthTimeoutMs?: number;
  /**
   * How long a workspace's health is answered without checking again; 10 s by default. An older
   * one is still answered at once, while a check refreshes it in the background.
   */
  healthTtlMs?: number;
  /** The clock that ages health answers (tests move it); real time by default. */
  healthClock?: Clock;
  /**
   * The clients of workspace agents, shared with the worker (one connection pool and request
   * observer per server). Without it the API keeps its own and closes it when it closes.
   */
  agents?: AgentPool;
  /**
   * Bound on each agent request of the process routes (processes.ts); 10 s by default. The
   * panel polls them, so a hung agent must answer 502 soon rather than hold requests open.
   */
  agentTimeoutMs?: number;
}

/** What every route group gets: the options and the API's own shared state. */
export interface ApiContext extends ApiOptions {
  /** The one change subscription, shared by every event stream. */
  changes: ChatChanges;
  /** Closes each open event stream (called when the API closes). */
  streams: Set<() => void>;
  /** The given pool, or the API's own. */
  agents: AgentPool;
}

/** JSON.parse that refuses prototype poisoning (`__proto__`, `constructor.prototype`). */
function parseJson(text: string): unknown {
  return JSON.parse(text, (key, value: unknown) => {
    const poisoned =
      key === "__proto__" ||
      (key === "constructor" &&
        typeof value === "object" &&
        value !== null &&
        "prototype" in value);
    if (poisoned) throw new ApiError(400, "The request body must not set an object's prototype.");
    return value;
  });
}

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
  });
  const ctx: ApiContext = {
    ...o,
    changes: new ChatChanges(o.db),
    streams: new Set(),
    agents: o.agents ?? new AgentPool(o.db),
  };

  // An empty JSON body is no body (a bodiless POST from a client that always sets the type).
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    try {
      done(null, text.trim() === "" ? undefined : parseJson(text));
    } catch (err) {
      done(
        err instanceof ApiError ? err : new ApiError(400, "The request body is not valid JSON."),
      );
    }
  });
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(async (request) => {
    throw new ApiError(404, `No route ${request.method} ${request.url.split("?")[0]}.`);
  });
  app.addHook("onRequest", async (request) => authenticate(ctx, request));
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
    // A pool that was given belongs to its giver (the worker may still be using it).
    if (!o.agents) ctx.agents.close();
  });

  app.get("/api/v1/health", async () => ({ status: "ok" }));
  metricsRoutes(app, ctx);
  authRoutes(app, ctx);
  userRoutes(app, ctx);
  tokenRoutes(app, ctx);
  workspaceRoutes(app, ctx);
  modelRoutes(app, ctx);
  chatRoutes(app, ctx);
  processRoutes(app, ctx);
  streamRoutes(app, ctx);
  usageRoutes(app, ctx);
  auditRoutes(app, ctx);
  openApiRoutes(app, ctx);
  webRoutes(app, ctx);
  internalRoutes(app, ctx);

  await app.ready();
  return app;
}
