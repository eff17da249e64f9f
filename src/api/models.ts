// Model configs: admins register a provider, model and (optionally) key; everyone lists them.
// The key is stored but never answered. At most one config is the default: setting one clears
// the others in the same transaction, under a table lock so two racing calls cannot both win.

import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiContext } from "./app.ts";
import { admin, caller } from "./auth.ts";
import { PROVIDER_NAMES } from "../model/index.ts";
import { parse } from "./errors.ts";
import { modelView } from "./views.ts";

const NewModelBody = z
  .object({
    provider: z.enum(PROVIDER_NAMES),
    model: z.string().trim().min(1, "must not be empty").max(200),
    base_url: z
      .string()
      .trim()
      .max(2048)
      .refine((s) => URL.canParse(s), "must be a URL")
      .optional(),
    api_key: z.string().min(1, "must not be empty").max(4096).optional(),
    context_limit: z.number().int().positive().max(100_000_000).optional(),
    is_default: z.boolean().optional(),
  })
  .superRefine((b, c) => {
    if (b.provider === "openai-compatible" && b.base_url === undefined) {
      c.addIssue({
        code: "custom",
        path: ["base_url"],
        message: "is required for openai-compatible",
      });
    }
  });

export function modelRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/api/v1/models", async (request, reply) => {
    admin(request);
    const body = parse(NewModelBody, request.body, "body");
    const isDefault = body.is_default ?? false;
    const row = await ctx.db.transaction(async (tx) => {
      if (isDefault) {
        await tx.query("LOCK TABLE model_configs IN SHARE ROW EXCLUSIVE MODE");
        await tx.query("UPDATE model_configs SET is_default = false WHERE is_default");
      }
      const r = await tx.query(
        `INSERT INTO model_configs (id, provider, model, base_url, api_key, context_limit, is_default)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
        [
          randomUUID(),
          body.provider,
          body.model,
          body.base_url ?? null,
          body.api_key ?? null,
          body.context_limit ?? null,
          isDefault,
        ],
      );
      return r.rows[0]!;
    });
    return reply.code(201).send(modelView(row));
  });

  app.get("/api/v1/models", async (request) => {
    caller(request);
    const r = await ctx.db.query(
      "SELECT * FROM model_configs ORDER BY is_default DESC, created_at, id",
    );
    return { models: r.rows.map(modelView) };
  });
}
