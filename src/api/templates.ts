// Templates (admin): a Terraform folder by name, its versions, its workspaces' default TTL and
// the longest one a member may ask for (max_ttl_ms; admins and owners are not held to it).
// Everyone signed in lists them (to make a workspace from one); only admins and owners see
// their files, create, change or delete them. New files make a new version, which running
// workspaces take at their next start; a template that workspaces use cannot be deleted.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import {
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  TemplateFiles,
  templateFiles,
  TemplateInUseError,
  TemplateNameTakenError,
  TemplateTtlError,
  updateTemplate,
  type Template,
} from "../workspaces/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, isStaff, staff } from "./auth.ts";
import { ApiError, IdParams, notFound, parse } from "./errors.ts";

const TemplateName = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(100)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]*$/,
    "letters, digits, '.', '_' and '-', from a letter or digit",
  );
const Description = z.string().trim().max(2000);
const DefaultTtlMs = z
  .number()
  .int()
  .min(0)
  .max(30 * 86_400_000)
  .refine((n) => n === 0 || n >= 1_000, "must be 0 (never stop) or at least 1000");
/** The cap on a member's workspace TTL: at least a second, at most 30 days; null: none. */
const MaxTtlMs = z
  .number()
  .int()
  .min(1_000)
  .max(30 * 86_400_000)
  .nullable();

export const NewTemplateBody = z.object({
  name: TemplateName,
  description: Description.optional(),
  files: TemplateFiles,
  default_ttl_ms: DefaultTtlMs.optional(),
  max_ttl_ms: MaxTtlMs.optional(),
});

export const TemplatePatch = z.object({
  name: TemplateName.optional(),
  description: Description.optional(),
  files: TemplateFiles.optional(),
  default_ttl_ms: DefaultTtlMs.optional(),
  max_ttl_ms: MaxTtlMs.optional(),
});

export interface TemplateView {
  id: string;
  name: string;
  description: string;
  version: number;
  default_ttl_ms: number;
  /** The longest ttl_ms a member's workspace may have (0 not allowed); null: no cap. */
  max_ttl_ms: number | null;
  created_at: string;
  updated_at: string;
  workspace_count: number;
  /** The newest version's files: admins and owners only, on a single template's read. */
  files?: Record<string, string>;
}

export function templateView(t: Template): TemplateView {
  return {
    id: t.id,
    name: t.name,
    description: t.description,
    version: t.version,
    default_ttl_ms: t.defaultTtlMs,
    max_ttl_ms: t.maxTtlMs,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    workspace_count: t.workspaceCount,
  };
}

/** The model's errors as answers. */
function answer(err: unknown): never {
  if (err instanceof TemplateNameTakenError)
    throw new ApiError(409, err.message, "Pick another name, or change that template.");
  if (err instanceof TemplateTtlError)
    throw ApiError.coded(
      "invalid_body",
      err.message,
      `default_ttl_ms: at most max_ttl_ms (${err.maxTtlMs}), and not 0 (never stop)`,
    );
  if (err instanceof TemplateInUseError)
    throw new ApiError(409, err.message, "Delete its workspaces first.");
  // Two creates of one name at once: the unique index answers for the slower.
  if (typeof err === "object" && err !== null && (err as { code?: string }).code === "23505")
    throw new ApiError(409, "A template with that name already exists.");
  throw err;
}

export function templateRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/templates", async (request, reply) => {
    const { user } = staff(request);
    const body = parse(NewTemplateBody, request.body, "body");
    const t = await ctx.db
      .transaction(async (tx) => {
        const t = await createTemplate(tx, {
          name: body.name,
          ...(body.description !== undefined && { description: body.description }),
          files: body.files,
          ...(body.default_ttl_ms !== undefined && { defaultTtlMs: body.default_ttl_ms }),
          ...(body.max_ttl_ms !== undefined && { maxTtlMs: body.max_ttl_ms }),
          createdBy: user.id,
        });
        await audit(tx, request, {
          userId: user.id,
          action: "template.create",
          target: t.id,
          details: {
            name: t.name,
            files: Object.keys(body.files).length,
            ...(t.maxTtlMs !== null && { max_ttl_ms: t.maxTtlMs }),
          },
        });
        return t;
      })
      .catch(answer);
    return reply.code(201).send(templateView(t));
  });

  app.get("/api/v1/templates", async () => ({
    templates: (await listTemplates(ctx.db)).map(templateView),
  }));

  app.get("/api/v1/templates/:id", async (request) => {
    const { user } = caller(request);
    const { id } = parse(IdParams, request.params, "path");
    const t = await getTemplate(ctx.db, id);
    if (!t) throw notFound("Template", id);
    if (!isStaff(user)) return templateView(t);
    const files = await templateFiles(ctx.db, id, t.version);
    return { ...templateView(t), ...(files && { files }) };
  });

  app.patch("/api/v1/templates/:id", async (request) => {
    const { user } = staff(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(TemplatePatch, request.body, "body");
    const t = await ctx.db
      .transaction(async (tx) => {
        const before = await getTemplate(tx, id);
        const t = await updateTemplate(tx, id, {
          ...(body.name !== undefined && { name: body.name }),
          ...(body.description !== undefined && { description: body.description }),
          ...(body.files !== undefined && { files: body.files }),
          ...(body.default_ttl_ms !== undefined && { defaultTtlMs: body.default_ttl_ms }),
          ...(body.max_ttl_ms !== undefined && { maxTtlMs: body.max_ttl_ms }),
          updatedBy: user.id,
        });
        if (!t) throw notFound("Template", id);
        await audit(tx, request, {
          userId: user.id,
          action: "template.update",
          target: id,
          details: {
            ...(body.name !== undefined && { name: body.name }),
            ...(before && t.version !== before.version && { version: t.version }),
            ...(body.default_ttl_ms !== undefined && { default_ttl_ms: body.default_ttl_ms }),
            ...(body.max_ttl_ms !== undefined && { max_ttl_ms: body.max_ttl_ms }),
          },
        });
        return t;
      })
      .catch(answer);
    return templateView(t);
  });

  app.delete("/api/v1/templates/:id", async (request, reply) => {
    const { user } = staff(request);
    const { id } = parse(IdParams, request.params, "path");
    await ctx.db
      .transaction(async (tx) => {
        const t = await getTemplate(tx, id);
        if (!(await deleteTemplate(tx, id))) throw notFound("Template", id);
        await audit(tx, request, {
          userId: user.id,
          action: "template.delete",
          target: id,
          details: { name: t?.name },
        });
      })
      .catch(answer);
    return reply.code(204).send();
  });
}
