// `GET /api/v1/openapi.json`: an OpenAPI 3.1 document of the public API, its request bodies,
// path and query parameters generated (z.toJSONSchema, input side) from the very zod schemas
// the routes validate with. ROUTES names every public route; a test checks it against the
// routes the API registers, so a new route without an entry fails.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiContext } from "./context.ts";
import { AuditQuery } from "./audit.ts";
import { LoginBody, PUBLIC_ROUTES } from "./auth.ts";
import {
  AfterQuery,
  ChatListQuery,
  ChatPatchBody,
  EditBody,
  MessageParams,
  NewChatBody,
  QueuedParams,
  SendBody,
} from "./chats.ts";
import { API_ERROR_CODES, API_ERRORS, IdParams } from "./errors.ts";
import { ModelPatch, NewModelBody } from "./models.ts";
import { ProcessParams, SignalBody } from "./processes.ts";
import { InstructionsBody } from "./prompt.ts";
import { StreamQuery } from "./stream.ts";
import { BuildParams, NewTemplateWorkspaceBody } from "./template-workspaces.ts";
import { NewTemplateBody, TemplatePatch } from "./templates.ts";
import { NewTokenBody, UserTokenParams } from "./tokens.ts";
import { ReportQuery } from "./usage.ts";
import { FirstUserBody, NewUserBody, PasswordChange, UserPatch } from "./users.ts";
import { NewWorkspaceBody, WorkspacePatch } from "./workspaces.ts";

interface RouteDoc {
  summary: string;
  /** The success status. */
  status: number;
  body?: z.ZodType;
  params?: z.ZodObject;
  query?: z.ZodType;
}

/** Every public route, `METHOD /path` as Fastify declares it (`:id`). */
export const ROUTES: Record<string, RouteDoc> = {
  "GET /api/v1/health": { summary: "Liveness", status: 200 },
  "GET /api/v1/openapi.json": { summary: "This document", status: 200 },
  "GET /api/v1/setup": {
    summary: "Whether the owner is still to be created (the UI shows setup, else sign-in)",
    status: 200,
  },
  "POST /api/v1/users/first": {
    summary: "Create the owner (only while no user exists)",
    status: 201,
    body: FirstUserBody,
  },
  "POST /api/v1/auth/login": {
    summary: "Log in: a token, also set as the session cookie",
    status: 200,
    body: LoginBody,
  },
  "POST /api/v1/auth/logout": { summary: "End the session", status: 204 },
  "GET /api/v1/me": { summary: "The caller", status: 200 },
  "POST /api/v1/users": { summary: "Create a user (admin)", status: 201, body: NewUserBody },
  "GET /api/v1/users": { summary: "List users (admin)", status: 200 },
  "PATCH /api/v1/users/:id": {
    summary:
      "Change a user's role or disable/enable them (admin; an owner only by an owner). Disabling ends every token and session of theirs at once",
    status: 200,
    params: IdParams,
    body: UserPatch,
  },
  "POST /api/v1/me/password": {
    summary:
      "Change the caller's password; ends their other sessions (this one and API tokens stay)",
    status: 204,
    body: PasswordChange,
  },
  "GET /api/v1/users/:id/tokens": {
    summary: "A user's tokens and sessions, never a secret (admin; an owner's only by an owner)",
    status: 200,
    params: IdParams,
  },
  "DELETE /api/v1/users/:id/tokens/:token_id": {
    summary: "Revoke a user's token or session (admin; an owner's only by an owner)",
    status: 204,
    params: UserTokenParams,
  },
  "POST /api/v1/tokens": {
    summary: "Create an API token, optionally expiring (expires_in_ms or expires_at)",
    status: 201,
    body: NewTokenBody,
  },
  "GET /api/v1/tokens": { summary: "List the caller's tokens", status: 200 },
  "DELETE /api/v1/tokens/:id": { summary: "Revoke a token", status: 204, params: IdParams },
  "POST /api/v1/workspaces": {
    summary: "Register a workspace by agent URL, or make one from a template (its start is queued)",
    status: 201,
    body: z.union([NewWorkspaceBody, NewTemplateWorkspaceBody]),
  },
  "POST /api/v1/workspaces/:id/start": {
    summary: "Start a template workspace (a start build)",
    status: 202,
    params: IdParams,
  },
  "POST /api/v1/workspaces/:id/stop": {
    summary: "Stop a template workspace (a stop build; 409 while a chat runs on it)",
    status: 202,
    params: IdParams,
  },
  "GET /api/v1/workspaces/:id/builds": {
    summary: "A template workspace's builds, newest first",
    status: 200,
    params: IdParams,
  },
  "GET /api/v1/workspaces/:id/builds/:build_id/logs": {
    summary: "A build's Terraform output so far (text/plain; its workspace's owner and admins)",
    status: 200,
    params: BuildParams,
  },
  "POST /api/v1/templates": {
    summary: "Create a template (admin)",
    status: 201,
    body: NewTemplateBody,
  },
  "GET /api/v1/templates": { summary: "List templates", status: 200 },
  "GET /api/v1/templates/:id": {
    summary: "A template (with its files, for admins)",
    status: 200,
    params: IdParams,
  },
  "PATCH /api/v1/templates/:id": {
    summary: "Change a template (admin); new files make a new version",
    status: 200,
    params: IdParams,
    body: TemplatePatch,
  },
  "DELETE /api/v1/templates/:id": {
    summary: "Delete a template no workspace uses (admin)",
    status: 204,
    params: IdParams,
  },
  "GET /api/v1/workspaces": { summary: "List workspaces with health", status: 200 },
  "GET /api/v1/workspaces/:id": {
    summary: "A workspace with health",
    status: 200,
    params: IdParams,
  },
  "PATCH /api/v1/workspaces/:id": {
    summary: "Change or share a workspace",
    status: 200,
    params: IdParams,
    body: WorkspacePatch,
  },
  "DELETE /api/v1/workspaces/:id": {
    summary:
      "Delete a workspace (not while a chat runs in it); a template workspace answers 202 and goes once its delete build succeeded",
    status: 204,
    params: IdParams,
  },
  "POST /api/v1/models": { summary: "Add a model (admin)", status: 201, body: NewModelBody },
  "GET /api/v1/models": { summary: "List models", status: 200 },
  "PATCH /api/v1/models/:id": {
    summary: "Change a model (admin)",
    status: 200,
    params: IdParams,
    body: ModelPatch,
  },
  "DELETE /api/v1/models/:id": {
    summary: "Delete a model (admin)",
    status: 204,
    params: IdParams,
  },
  "POST /api/v1/chats": {
    summary:
      "Create a chat. With Accept: text/event-stream the 201 is the new chat's event stream: a `chat` event (the JSON answer's body), then the stream as GET /api/v1/chats/{id}/stream gives it from the start",
    status: 201,
    body: NewChatBody,
  },
  "GET /api/v1/chats": {
    summary: "The caller's chats (the archived ones with archived=true)",
    status: 200,
    query: ChatListQuery,
  },
  "GET /api/v1/chats/:id": { summary: "A chat", status: 200, params: IdParams },
  "PATCH /api/v1/chats/:id": {
    summary: "Rename or archive a chat (its owner)",
    status: 200,
    params: IdParams,
    body: ChatPatchBody,
  },
  "POST /api/v1/chats/:id/messages": {
    summary: "Send a message (403 once the chat's workspace is no longer shared with its owner)",
    status: 202,
    params: IdParams,
    body: SendBody,
  },
  "GET /api/v1/chats/:id/messages": {
    summary: "A chat's messages",
    status: 200,
    params: IdParams,
    query: AfterQuery,
  },
  "PATCH /api/v1/chats/:id/messages/:message_id": {
    summary: "Edit a user message",
    status: 200,
    params: MessageParams,
    body: EditBody,
  },
  "POST /api/v1/chats/:id/interrupt": {
    summary: "Interrupt a chat",
    status: 202,
    params: IdParams,
  },
  "POST /api/v1/chats/:id/refresh-context": {
    summary: "Take a new snapshot of the chat's workspace context (AGENTS.md, environment)",
    status: 200,
    params: IdParams,
  },
  "POST /api/v1/chats/:id/compact": {
    summary: "Make a compaction the chat's next action",
    status: 202,
    params: IdParams,
  },
  "GET /api/v1/settings/instructions": {
    summary: "The organisation-wide instructions every chat's prompt carries",
    status: 200,
  },
  "PUT /api/v1/settings/instructions": {
    summary: "Set the organisation-wide instructions (admin; audited)",
    status: 200,
    body: InstructionsBody,
  },
  "GET /api/v1/chats/:id/queue": {
    summary: "The messages waiting to run in a chat",
    status: 200,
    params: IdParams,
  },
  "DELETE /api/v1/chats/:id/queue/:queued_id": {
    summary: "Take a queued message back before it runs",
    status: 204,
    params: QueuedParams,
  },
  "GET /api/v1/chats/:id/stream": {
    summary: "A chat's event stream (text/event-stream)",
    status: 200,
    params: IdParams,
    query: StreamQuery,
  },
  "GET /api/v1/chats/:id/usage": { summary: "A chat's usage", status: 200, params: IdParams },
  "GET /api/v1/chats/:id/processes": {
    summary:
      "The chat's processes in its workspace, running first (502 when its agent is unreachable)",
    status: 200,
    params: IdParams,
  },
  "GET /api/v1/chats/:id/processes/:process_id/output": {
    summary: "A process's output so far, without waiting",
    status: 200,
    params: ProcessParams,
  },
  "POST /api/v1/chats/:id/processes/:process_id/signal": {
    summary: "Stop a process: terminate (SIGTERM) or kill (SIGKILL); the chat's owner only",
    status: 200,
    params: ProcessParams,
    body: SignalBody,
  },
  "GET /api/v1/usage": { summary: "Usage report", status: 200, query: ReportQuery },
  "GET /api/v1/audit": { summary: "The audit log (admin)", status: 200, query: AuditQuery },
};

type JsonSchema = Record<string, unknown>;

function schemaOf(s: z.ZodType): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any" });
  return rest;
}

/** Path or query parameters from an object schema's properties. */
function parameters(where: "path" | "query", s: z.ZodType): JsonSchema[] {
  const json = schemaOf(s);
  const props = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required ?? []) as string[]);
  return Object.entries(props).map(([name, schema]) => ({
    name,
    in: where,
    required: where === "path" || required.has(name),
    schema,
  }));
}

/** Every error answer: `{message, code, detail?}`, `code` from the catalogue (errors.ts). */
const ERROR = {
  description: "`{message, code, detail?}`: `code` is stable (see the ErrorCode schema)",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
};

const ERROR_SCHEMAS = {
  Error: {
    type: "object",
    properties: {
      message: { type: "string", description: "A sentence for people; may change." },
      code: { $ref: "#/components/schemas/ErrorCode" },
      detail: { type: "string", description: "Which field, or what to do next." },
    },
    required: ["message", "code"],
  },
  ErrorCode: {
    type: "string",
    enum: API_ERROR_CODES,
    description:
      "Stable: clients branch on the code, never on the message. Each code has one status:\n\n" +
      API_ERROR_CODES.map(
        (c) => `- \`${c}\` (${API_ERRORS[c].status}): ${API_ERRORS[c].description}`,
      ).join("\n"),
    "x-status": Object.fromEntries(API_ERROR_CODES.map((c) => [c, API_ERRORS[c].status])),
  },
};

export function openApiDocument(): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const [key, r] of Object.entries(ROUTES)) {
    const [method, route] = key.split(" ") as [string, string];
    const path = route.replace(/:([a-z_]+)/g, "{$1}");
    const op: JsonSchema = {
      summary: r.summary,
      parameters: [
        ...(r.params ? parameters("path", r.params) : []),
        ...(r.query ? parameters("query", r.query) : []),
      ],
      responses: { [String(r.status)]: { description: "Success" }, default: ERROR },
    };
    if (r.body)
      op.requestBody = {
        required: true,
        content: { "application/json": { schema: schemaOf(r.body) } },
      };
    // Served without a token: the same list the bearer check lets through.
    if (PUBLIC_ROUTES.has(key)) op.security = [];
    (paths[path] ??= {})[method.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info: { title: "Tether", version: "1" },
    components: {
      schemas: ERROR_SCHEMAS,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer" },
        session: { type: "apiKey", in: "cookie", name: "tether_session" },
      },
    },
    security: [{ bearer: [] }, { session: [] }],
    paths,
  };
}

export function openApiRoutes(app: FastifyInstance, _ctx: ApiContext): void {
  // Made at the first request: converting the schemas is ~80 ms of CPU a server start would pay.
  let doc: JsonSchema | undefined;
  app.get("/api/v1/openapi.json", async () => (doc ??= openApiDocument()));
}
