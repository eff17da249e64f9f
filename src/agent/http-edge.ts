// The agent's HTTP edge: the Fastify instance every route runs on — raw-byte bodies, the
// request's entry instant and chat context, refusals before any route (a browser's Origin, a
// wrong token, a non-JSON body on a JSON route, what the HTTP parser refuses) and the
// `{message, detail?}` error shape — and the parsing of a route's JSON body.

import { timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import type { z } from "zod";
import { parseChatIdHeader, type Clock } from "../contract/index.ts";
import { answerMalformedRequest } from "../contract/malformed-request.ts";
import { codedAnswer, errorAnswer, type Answer } from "./answer.ts";
import { distinctHeaders, sendAnswer, type AgentRequestState } from "./toolcalls/middleware.ts";

/** Largest JSON body any route takes. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/** Parses a JSON body with a schema; a failure is a 400 saying what was wrong. */
export function parseJsonBody<T>(
  body: Buffer,
  schema: z.ZodType<T>,
): { ok: true; value: T } | { ok: false; answer: Answer } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, answer: errorAnswer(400, "Request body must be valid JSON.") };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`)
      .join("; ");
    return { ok: false, answer: errorAnswer(400, "Invalid request body.", detail) };
  }
  return { ok: true, value: parsed.data };
}

/** Marks a route whose body is JSON: it requires `Content-Type: application/json`. */
export const JSON_ROUTE = { config: { json: true } } as const;

/**
 * The Fastify instance every agent route runs on: raw-byte bodies, the request's entry
 * instant and chat context, token auth, and the `{message, detail?}` error shape.
 */
/**
 * Routes parse their bodies with zod and declare no Fastify schema, so Fastify's default
 * compilers (ajv, fast-json-stringify: about 30 ms of CPU at every start here) are never
 * needed. These refuse a schema.
 */
const NO_FASTIFY_SCHEMAS = {
  compilersFactory: {
    buildValidator: () => () => {
      throw new Error("Agent routes parse their bodies with zod, not a schema.");
    },
    buildSerializer: () => () => {
      throw new Error("Agent routes send plain JSON; a response schema is not supported.");
    },
  },
};

export function agentFastify(clock: Clock, tokenText?: string): FastifyInstance {
  const token = tokenText ? Buffer.from(tokenText) : undefined;
  const app = Fastify({
    logger: false,
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    return503OnClosing: true,
    schemaController: NO_FASTIFY_SCHEMAS,
    clientErrorHandler: (err, socket) =>
      answerMalformedRequest(err, socket, (m) => ({ message: m.message, code: m.code })),
  });
  app.decorateRequest("agent", null);

  // Every route takes its body as raw bytes: the middleware hashes and hands on exactly these.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  // A callback hook, not an async one: a request that passes goes on to its route at once,
  // without a promise and a microtask turn of its own.
  app.addHook("onRequest", (request, reply, done) => {
    // The clock is read once, when the request enters, before the body is read.
    const state: AgentRequestState = { enteredAt: clock.now(), chatId: undefined };
    (request as unknown as { agent: AgentRequestState }).agent = state;
    const refusal = edgeRefusal(request, token, state);
    if (refusal) sendAnswer(reply, refusal);
    else done();
  });

  app.setNotFoundHandler((request, reply) =>
    sendAnswer(
      reply,
      errorAnswer(404, `Route ${request.method} ${request.url.split("?")[0]} not found.`),
    ),
  );
  app.setErrorHandler(
    (err: { statusCode?: number; code?: string; message: string }, _request, reply) => {
      if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
        return sendAnswer(reply, errorAnswer(413, "Request body is too large.", err.message));
      }
      if (!err.statusCode || err.statusCode >= 500) {
        process.stderr.write(
          `${JSON.stringify({ level: "error", msg: "agent request failed", err: String((err as Error).stack ?? err.message) })}\n`,
        );
      }
      const status =
        err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      return sendAnswer(
        reply,
        errorAnswer(status, status === 500 ? "Internal error." : err.message),
      );
    },
  );

  return app;
}

/**
 * Why the edge refuses a request before any route, or undefined; sets the request's chat.
 */
function edgeRefusal(
  request: FastifyRequest,
  token: Buffer | undefined,
  state: AgentRequestState,
): Answer | undefined {
  // The agent serves only its server, never a browser: a page's request carries an Origin
  // (chatd's, and the dial-out connection's, never do), so it is refused before anything.
  if (request.headers.origin !== undefined) {
    return codedAnswer(
      "origin_refused",
      "Requests from web pages are refused.",
      "The workspace agent answers only its server; a request with an Origin header comes from a browser.",
    );
  }
  if (token && !authorized(request, token)) {
    return errorAnswer(401, "Missing or wrong agent token.", "Send Authorization: Bearer <token>.");
  }
  const chat = parseChatIdHeader(distinctHeaders(request.raw));
  if (chat.kind === "error") return errorAnswer(400, "Invalid Coder-Chat-Id header.", chat.detail);
  if (chat.kind === "chat") state.chatId = chat.chatId;
  const config = request.routeOptions.config as { json?: boolean } | undefined;
  if (config?.json && !jsonContentType(request)) {
    return codedAnswer(
      "unsupported_media_type",
      "Send the request body as Content-Type: application/json.",
      `got ${JSON.stringify(request.headers["content-type"] ?? "no Content-Type")}`,
    );
  }
  return undefined;
}

/**
 * A 400 naming the first query parameter given more than once (the query parser makes it an
 * array); undefined when every parameter has one value.
 */
export function repeatedQuery(query: unknown): Answer | undefined {
  if (typeof query !== "object" || query === null) return undefined;
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) {
      return codedAnswer(
        "repeated_query_parameter",
        `The ${name} query parameter is given ${value.length} times. Pass it once.`,
      );
    }
  }
  return undefined;
}

/**
 * A JSON route's Content-Type: `application/json` (parameters allowed), or none at all on a
 * request without a body (a bodiless cancel is `{}`). Anything else, `text/plain` above all
 * (a form or a no-CORS fetch sends it without a preflight), or a repeated one, is refused.
 */
function jsonContentType(request: FastifyRequest): boolean {
  const types = distinctHeaders(request.raw)["content-type"];
  // Node keeps only the first of repeated Content-Types: two are ambiguous, so neither is taken.
  if (types !== undefined && types.length > 1) return false;
  const type = request.headers["content-type"];
  if (type === undefined) {
    const length = request.headers["content-length"];
    return request.headers["transfer-encoding"] === undefined && (length ?? "0") === "0";
  }
  return type.split(";")[0]!.trim().toLowerCase() === "application/json";
}

function authorized(request: FastifyRequest, token: Buffer): boolean {
  const values = distinctHeaders(request.raw).authorization;
  if (values?.length !== 1) return false;
  const m = /^Bearer (.+)$/.exec(values[0]!);
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  return given.length === token.length && timingSafeEqual(given, token);
}
