// Model configs: admins and owners register a provider, model, (optionally) key and prices,
// change them and delete them; members list only the enabled ones. The key is stored sealed
// (src/chatd/secrets) and never answered, logged or audited. At most one config is the
// default: setting one clears the others in the same transaction, under a table lock so two
// racing calls cannot both win.
//
// Prices are integer micro-dollars per million tokens (`input_price_per_mtok_micros: 3000000`
// is $3 per million input tokens); an assistant message costs its tokens at these prices.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";
import { SLOTS } from "../chatd/secrets/index.ts";
import type { ApiContext } from "./context.ts";
import { audit } from "./audit.ts";
import { caller, isStaff, staff } from "./auth.ts";
import { PROVIDER_NAMES } from "../model/index.ts";
import { ApiError, IdParams, notFound, parse } from "./errors.ts";
import { modelView } from "./views.ts";

const Price = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

const ModelFields = z.object({
  provider: z.enum(PROVIDER_NAMES),
  model: z.string().trim().min(1, "must not be empty").max(200),
  base_url: z
    .string()
    .trim()
    .max(2048)
    .refine((s) => URL.canParse(s), "must be a URL"),
  api_key: z.string().min(1, "must not be empty").max(4096),
  context_limit: z.number().int().positive().max(100_000_000),
  /** Compact after a step whose prompt passed this percent of the limit; 100 = never. */
  compact_threshold_percent: z.number().int().min(1).max(100),
  is_default: z.boolean(),
  enabled: z.boolean(),
  input_price_per_mtok_micros: Price,
  output_price_per_mtok_micros: Price,
});

export const NewModelBody = ModelFields.partial()
  .required({ provider: true, model: true })
  .superRefine((b, c) => {
    if (b.provider === "openai-compatible" && b.base_url === undefined) {
      c.addIssue({
        code: "custom",
        path: ["base_url"],
        message: "is required for openai-compatible",
      });
    }
  });

/** Every field may change; `null` clears base_url, api_key or context_limit. */
export const ModelPatch = ModelFields.extend({
  base_url: ModelFields.shape.base_url.nullable(),
  api_key: ModelFields.shape.api_key.nullable(),
  context_limit: ModelFields.shape.context_limit.nullable(),
  compact_threshold_percent: ModelFields.shape.compact_threshold_percent.nullable(),
}).partial();

const COLUMNS = [
  "provider",
  "model",
  "base_url",
  "api_key",
  "context_limit",
  "compact_threshold_percent",
  "is_default",
  "enabled",
  "input_price_per_mtok_micros",
  "output_price_per_mtok_micros",
] as const;

/** The fields changed, for the audit log: the key only as "changed", never its value. */
function auditFields(
  body: Partial<Record<(typeof COLUMNS)[number], unknown>>,
): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const k of COLUMNS) if (body[k] !== undefined) fields[k] = body[k];
  if ("api_key" in fields) fields.api_key = fields.api_key === null ? "cleared" : "set";
  return fields;
}

async function clearDefault(tx: Queryable): Promise<void> {
  await tx.query("LOCK TABLE model_configs IN SHARE ROW EXCLUSIVE MODE");
  await tx.query("UPDATE model_configs SET is_default = false WHERE is_default");
}

/**
 * A chat that names no model gets the default, and a disabled model is as good as unknown to a
 * new chat: so the default is always enabled. Thrown inside the write's transaction, this
 * undoes it.
 */
function refuseDisabledDefault(row: Record<string, unknown>): void {
  if (row.is_default === true && row.enabled !== true) {
    throw ApiError.coded(
      "default_model_disabled",
      "The default model must be enabled.",
      "Make another model the default before disabling this one, or enable it first.",
    );
  }
}

export function modelRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/models", async (request, reply) => {
    const { user } = staff(request);
    const body = parse(NewModelBody, request.body, "body");
    const id = randomUUID();
    const row = await ctx.db.transaction(async (tx) => {
      if (body.is_default) await clearDefault(tx);
      const r = await tx.query(
        `INSERT INTO model_configs (id, provider, model, base_url, api_key, context_limit, is_default,
           enabled, input_price_per_mtok_micros, output_price_per_mtok_micros, compact_threshold_percent)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
        [
          id,
          body.provider,
          body.model,
          body.base_url ?? null,
          ctx.secrets.sealOrNull(body.api_key, SLOTS.modelApiKey(id)),
          body.context_limit ?? null,
          body.is_default ?? false,
          body.enabled ?? true,
          body.input_price_per_mtok_micros ?? 0,
          body.output_price_per_mtok_micros ?? 0,
          body.compact_threshold_percent ?? null,
        ],
      );
      const row = r.rows[0]!;
      refuseDisabledDefault(row);
      await audit(tx, request, {
        userId: user.id,
        action: "model.create",
        target: row.id as string,
        details: auditFields(body),
      });
      return row;
    });
    return reply.code(201).send(modelView(row));
  });

  app.patch("/api/v1/models/:id", async (request) => {
    const { user } = staff(request);
    const { id } = parse(IdParams, request.params, "path");
    const body = parse(ModelPatch, request.body, "body");
    const row = await ctx.db.transaction(async (tx) => {
      if (body.is_default) await clearDefault(tx);
      const sets: string[] = ["updated_at = now()"];
      const values: unknown[] = [id];
      for (const k of COLUMNS) {
        if (body[k] === undefined) continue;
        values.push(
          k === "api_key" ? ctx.secrets.sealOrNull(body.api_key, SLOTS.modelApiKey(id)) : body[k],
        );
        sets.push(`${k} = $${values.length}`);
      }
      const r = await tx.query(
        `UPDATE model_configs SET ${sets.join(", ")} WHERE id = $1 RETURNING *`,
        values,
      );
      const row = r.rows[0];
      if (!row) throw notFound("Model config", id);
      refuseDisabledDefault(row);
      if (row.provider === "openai-compatible" && row.base_url === null) {
        throw ApiError.coded(
          "invalid_body",
          "Invalid request body.",
          "base_url: is required for openai-compatible",
        );
      }
      await audit(tx, request, {
        userId: user.id,
        action: "model.update",
        target: id,
        details: auditFields(body),
      });
      return row;
    });
    return modelView(row);
  });

  // Chats that used the model keep their history and fall back to the default model.
  app.delete("/api/v1/models/:id", async (request, reply) => {
    const { user } = staff(request);
    const { id } = parse(IdParams, request.params, "path");
    await ctx.db.transaction(async (tx) => {
      const r = await tx.query("DELETE FROM model_configs WHERE id = $1", [id]);
      if (r.affectedRows === 0) throw notFound("Model config", id);
      await audit(tx, request, { userId: user.id, action: "model.delete", target: id });
    });
    return reply.code(204).send();
  });

  app.get("/api/v1/models", async (request) => {
    const { user } = caller(request);
    const r = await ctx.db.query(
      "SELECT * FROM model_configs WHERE $1 OR enabled ORDER BY is_default DESC, created_at, id",
      [isStaff(user)],
    );
    return { models: r.rows.map(modelView) };
  });
}
