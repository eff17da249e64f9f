// The API's one error shape, `{message, detail?}`, and the edge parsers that produce it: every
// bad body, path or query becomes a 400 naming the field, and nothing else ever leaves as more
// than a status and a sentence (no stack traces, no SQL).

import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { ChatNotFoundError, MessageNotEditableError } from "../chatd/chats.ts";

export interface ErrorBody {
  message: string;
  detail?: string;
}

/** An answer other than success; the error handler sends it as `{message, detail?}`. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 429 | 502,
    message: string,
    readonly detail?: string,
    /** Headers sent with the answer (Retry-After of a 429). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): ErrorBody {
    return this.detail === undefined
      ? { message: this.message }
      : { message: this.message, detail: this.detail };
  }
}

export function notFound(what: string, id: string, field?: string): ApiError {
  return new ApiError(404, `${what} ${id} not found.`, field);
}

/** `path.to.field: what is wrong`, one issue after another. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`)
    .join("; ");
}

/** Parses untrusted input with a schema; a failure is a 400 whose detail names the field. */
export function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: "body" | "path" | "query",
): z.output<S> {
  const parsed = schema.safeParse(value ?? (what === "body" ? undefined : {}));
  if (!parsed.success) {
    const message =
      what === "body"
        ? "Invalid request body."
        : what === "path"
          ? "Invalid ID in the path."
          : "Invalid query parameter.";
    throw new ApiError(400, message, describeIssues(parsed.error));
  }
  return parsed.data;
}

const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID in canonical 8-4-4-4-12 form, answered in lower case. */
export const Uuid = z
  .string()
  .regex(CANONICAL_UUID, "must be a UUID")
  .transform((s) => s.toLowerCase());

/** An int64 ≥ 0 as a decimal string (message IDs cross JSON as strings). */
export const Int64String = z
  .string()
  .regex(/^[0-9]{1,19}$/, "must be a non-negative integer")
  // zod runs every check even after one failed: BigInt only gets what the regex let through.
  .refine((s) => !/^[0-9]+$/.test(s) || BigInt(s) <= 2n ** 63n - 1n, "must fit in a 64-bit integer")
  .transform((s) => BigInt(s).toString());

/** `{id}` in the path. */
export const IdParams = z.object({ id: Uuid });

/**
 * The error handler: an ApiError as it is; a chat gone meanwhile a 404; Fastify's own 4xx (bad JSON, body too large,
 * wrong content type) with their message; anything else a 500 that says nothing inside.
 */
export function handleError(
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  if (error instanceof ApiError) {
    void reply.code(error.status).headers(error.headers).send(error.body());
    return;
  }
  if (error instanceof ChatNotFoundError) {
    void reply.code(404).send({ message: `Chat ${error.chatId} not found.` });
    return;
  }
  if (error instanceof MessageNotEditableError) {
    const status = error.reason === "not_found" ? 404 : 400;
    void reply.code(status).send({ message: error.message });
    return;
  }
  const status =
    "statusCode" in error && typeof error.statusCode === "number" ? error.statusCode : 500;
  if (status >= 400 && status < 500) {
    void reply.code(status).send({ message: sentence(error.message) });
    return;
  }
  request.log.error({ err: error }, "request failed");
  void reply.code(500).send({ message: "Internal server error; the server log has the details." });
}

function sentence(message: string): string {
  const trimmed = message.trim();
  if (trimmed === "") return "Bad request.";
  const first = trimmed[0]!.toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}
