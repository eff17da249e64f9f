// The API's one error shape, `{message, code, detail?}`, the catalogue of its codes, and the
// edge parsers that produce it: every bad body, path or query becomes a 400 naming the field,
// and nothing else ever leaves as more than a status, a code and a sentence (no stack traces,
// no SQL). A `code` is stable: clients branch on it, never on the message, so a code is never
// renamed or given another status; new ones are added to API_ERRORS.

import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { ChatNotFoundError, MessageNotEditableError } from "../chatd/chats.ts";
import { findUnstorableText } from "../chatd/storable-text.ts";

/** The statuses an API error answers with. */
export type ApiErrorStatus =
  400 | 401 | 403 | 404 | 408 | 409 | 413 | 415 | 429 | 431 | 500 | 502 | 503;

/**
 * Every error code, with its status and what it means (the OpenAPI document's `ErrorCode` enum
 * and the README's catalogue are made from this table). The generic code of a status
 * (DEFAULT_CODES) stands in where nothing more specific is useful.
 */
export const API_ERRORS = {
  // 400: the request itself is wrong; `detail` names the field.
  bad_request: { status: 400, description: "The request is malformed." },
  malformed_request: {
    status: 400,
    description: "The request is not valid HTTP/1.1 (bad framing); the connection is closed.",
  },
  invalid_body: {
    status: 400,
    description: "The JSON body is not valid JSON or fails its schema; detail names the field.",
  },
  invalid_query: { status: 400, description: "A query parameter is invalid; detail names it." },
  invalid_path: { status: 400, description: "A path parameter (an ID) is invalid." },
  agent_url_credentials: {
    status: 400,
    description:
      "An agent URL carries credentials (user:password@); send the token as agent_token instead.",
  },
  agent_url_unresolvable: {
    status: 400,
    description: "An agent URL's host name does not resolve, so its address cannot be checked.",
  },
  agent_token_required: {
    status: 400,
    description:
      "A new agent_url for a workspace that has a token needs the new agent's agent_token (or null).",
  },
  message_not_editable: { status: 400, description: "The message cannot be edited." },
  // 401: who is asking is not known (any more).
  unauthorized: { status: 401, description: "No token, or one that is not (any longer) valid." },
  invalid_credentials: { status: 401, description: "Wrong email or password." },
  token_expired: { status: 401, description: "The API token passed its expires_at." },
  session_expired: {
    status: 401,
    description: "The session was idle longer than the server's session idle time; log in again.",
  },
  // 403: known, but not allowed.
  forbidden: { status: 403, description: "The caller may not do this." },
  user_disabled: { status: 403, description: "The user is disabled: no sign-in, no token." },
  csrf_rejected: {
    status: 403,
    description: "A cookie-authenticated change without the CSRF header or from another origin.",
  },
  wrong_password: { status: 403, description: "current_password is not the caller's password." },
  private_agent_address: {
    status: 403,
    description:
      "The agent URL's address is loopback, private, link-local, metadata or otherwise not public: only an admin or owner registers such an agent.",
  },
  // 404
  not_found: { status: 404, description: "No such route or resource (or not the caller's)." },
  request_timeout: {
    status: 408,
    description: "The request did not arrive in time; the connection is closed.",
  },
  // 409: the state forbids it now.
  conflict: { status: 409, description: "The resource's state forbids this now." },
  first_user_exists: { status: 409, description: "The first user already exists." },
  email_taken: { status: 409, description: "A user with this email already exists." },
  last_owner: {
    status: 409,
    description: "The last (enabled) owner cannot be demoted or disabled.",
  },
  cannot_disable_self: { status: 409, description: "A user cannot disable themself." },
  workspace_busy: { status: 409, description: "A chat is running in the workspace." },
  no_workspace: { status: 409, description: "The chat has no workspace." },
  process_not_running: { status: 409, description: "The process is not running." },
  default_model_disabled: { status: 409, description: "The default model must stay enabled." },
  // 413, 415, 429
  payload_too_large: { status: 413, description: "The body is larger than the API takes (1 MiB)." },
  unsupported_media_type: { status: 415, description: "The body's content type is not JSON." },
  rate_limited: { status: 429, description: "Too many attempts; Retry-After says when to retry." },
  request_head_too_large: {
    status: 431,
    description:
      "The request line and headers are larger than 16 KiB (a long query string, say); the connection is closed.",
  },
  // 5xx
  internal: { status: 500, description: "A bug or a database failure; the server log has it." },
  agent_unreachable: {
    status: 502,
    description:
      "The workspace agent could not be reached, lost the connection, timed out, or its address is not allowed.",
  },
  agent_error: {
    status: 502,
    description:
      "The workspace agent answered with an error, a refusal of the server's token, or a body that is not JSON.",
  },
  agent_answer_too_large: {
    status: 502,
    description: "The workspace agent's answer was larger than 16 MiB; it was not read.",
  },
  unavailable: { status: 503, description: "The server cannot serve this right now." },
} as const satisfies Record<string, { status: ApiErrorStatus; description: string }>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** Every code, in catalogue order (the OpenAPI enum). */
export const API_ERROR_CODES = Object.keys(API_ERRORS) as ApiErrorCode[];

/** The code of an error that names none: the generic one of its status. */
export const DEFAULT_CODES: Record<ApiErrorStatus, ApiErrorCode> = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  408: "request_timeout",
  409: "conflict",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  431: "request_head_too_large",
  500: "internal",
  502: "agent_error",
  503: "unavailable",
};

export interface ErrorBody {
  message: string;
  code: ApiErrorCode;
  detail?: string;
}

/** An answer other than success; the error handler sends it as `{message, code, detail?}`. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: ApiErrorStatus,
    message: string,
    readonly detail?: string,
    /** Headers sent with the answer (Retry-After of a 429). */
    readonly headers: Record<string, string> = {},
    /** The catalogue code; the generic one of the status when not given. */
    readonly code: ApiErrorCode = DEFAULT_CODES[status],
  ) {
    super(message);
  }

  /** An error with a catalogue code, at the code's status. */
  static coded(
    code: ApiErrorCode,
    message: string,
    detail?: string,
    headers: Record<string, string> = {},
  ): ApiError {
    return new ApiError(API_ERRORS[code].status, message, detail, headers, code);
  }

  body(): ErrorBody {
    return errorBody(this.code, this.message, this.detail);
  }
}

export function errorBody(code: ApiErrorCode, message: string, detail?: string): ErrorBody {
  return detail === undefined ? { message, code } : { message, code, detail };
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

type InputPart = "body" | "path" | "query";

const INVALID: Record<InputPart, { code: ApiErrorCode; message: string }> = {
  body: { code: "invalid_body", message: "Invalid request body." },
  path: { code: "invalid_path", message: "Invalid ID in the path." },
  query: { code: "invalid_query", message: "Invalid query parameter." },
};

/** Parses untrusted input with a schema; a failure is a 400 whose detail names the field. */
export function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: InputPart,
): z.output<S> {
  const parsed = schema.safeParse(value ?? (what === "body" ? undefined : {}));
  if (!parsed.success) {
    throw ApiError.coded(INVALID[what].code, INVALID[what].message, describeIssues(parsed.error));
  }
  return parsed.data;
}

/** What an unstorable string is told (API input is refused, never silently changed). */
const UNSTORABLE_TEXT = "must not contain NUL (U+0000) or an unpaired UTF-16 surrogate";

/**
 * The one edge check of text in every route's input (a preValidation hook): a NUL or an
 * unpaired surrogate in any string of the body, query or path parameters (keys included) is
 * a 400 naming the field, before any handler or schema sees it. Headers the API reads are not
 * stored as they are: tokens are only hashed, and the audit log makes its client fields
 * storable (audit.ts).
 */
export function refuseUnstorableInput(request: FastifyRequest): void {
  const parts: [InputPart, unknown][] = [
    ["path", request.params],
    ["query", request.query],
    ["body", request.body],
  ];
  for (const [what, value] of parts) {
    const path = findUnstorableText(value);
    if (path === undefined) continue;
    const field = path.length > 0 ? path.join(".") : what;
    throw ApiError.coded(INVALID[what].code, INVALID[what].message, `${field}: ${UNSTORABLE_TEXT}`);
  }
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

/** The code of one of Fastify's own 4xx errors (bad JSON, body too large, wrong content type). */
function fastifyCode(error: FastifyError | Error, status: ApiErrorStatus): ApiErrorCode {
  const code = "code" in error ? error.code : undefined;
  if (code === "FST_ERR_CTP_INVALID_JSON_BODY" || code === "FST_ERR_CTP_EMPTY_JSON_BODY")
    return "invalid_body";
  return DEFAULT_CODES[status];
}

function isErrorStatus(n: number): n is ApiErrorStatus {
  return Object.hasOwn(DEFAULT_CODES, n);
}

/**
 * The error handler: an ApiError as it is; a chat gone meanwhile a 404; Fastify's own 4xx (bad
 * JSON, body too large, wrong content type) with their message and code; anything else a 500
 * that says nothing inside.
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
    void reply.code(404).send(errorBody("not_found", `Chat ${error.chatId} not found.`));
    return;
  }
  if (error instanceof MessageNotEditableError) {
    const code = error.reason === "not_found" ? "not_found" : "message_not_editable";
    void reply.code(API_ERRORS[code].status).send(errorBody(code, error.message));
    return;
  }
  const status =
    "statusCode" in error && typeof error.statusCode === "number" ? error.statusCode : 500;
  if (status >= 400 && status < 500) {
    const known = isErrorStatus(status) ? status : 400;
    void reply.code(status).send(errorBody(fastifyCode(error, known), sentence(error.message)));
    return;
  }
  request.log.error({ err: error }, "request failed");
  void reply
    .code(500)
    .send(errorBody("internal", "Internal server error; the server log has the details."));
}

function sentence(message: string): string {
  const trimmed = message.trim();
  if (trimmed === "") return "Bad request.";
  const first = trimmed[0]!.toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}
