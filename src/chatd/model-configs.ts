// A chat's model from its `model_configs` row (the named one, else the `is_default` one): the
// worker's resolveModel. The row is read through the replica's config cache; one model object is
// kept per config and made again when the row changes (a PATCH), the older one let go.

import type { Chat } from "./chats.ts";
import { pricesOf } from "./billing.ts";
import type { ConfigCache } from "./config-cache.ts";
import type { Database } from "./db/index.ts";
import type { ResolvedModel } from "./generation.ts";
import { DEFAULT_CONTEXT_LIMIT_TOKENS } from "./prompt/index.ts";
import { SLOTS, type SecretBox } from "./secrets/index.ts";
import {
  createLanguageModel,
  knownContextLimit,
  type LanguageModel,
  type ProviderName,
} from "../model/index.ts";

type ModelConfigRow = {
  id: string;
  provider: string;
  model: string;
  base_url: string | null;
  api_key: string | null;
  updated_at: Date;
  enabled: boolean;
  input_price_per_mtok_micros: string | number;
  output_price_per_mtok_micros: string | number;
  context_limit: number | null;
  compact_threshold_percent: number | null;
};

export function modelResolver(
  db: Database,
  config: ConfigCache,
  secrets: SecretBox,
): (chat: Pick<Chat, "modelConfigId">) => Promise<ResolvedModel> {
  /** By config ID, with the update time it was made for. */
  const models = new Map<string, { version: string; model: LanguageModel }>();
  return async (chat) => {
    const read = () =>
      db.query<ModelConfigRow>(
        chat.modelConfigId
          ? "SELECT * FROM model_configs WHERE id = $1"
          : "SELECT * FROM model_configs WHERE is_default ORDER BY created_at DESC LIMIT 1",
        chat.modelConfigId ? [chat.modelConfigId] : [],
      );
    const r = await config.read("model_configs", chat.modelConfigId ?? "default", read);
    const c = r.rows[0];
    if (!c)
      throw new Error(
        "No model is configured: start the server with --model, or add one with POST /api/v1/models.",
      );
    const version = c.updated_at.toISOString();
    let m = models.get(c.id);
    if (m?.version !== version) {
      m = {
        version,
        model: await createLanguageModel({
          provider: c.provider as ProviderName,
          model: c.model,
          ...(c.base_url && { baseUrl: c.base_url }),
          ...(c.api_key && { apiKey: secrets.open(c.api_key, SLOTS.modelApiKey(c.id)) }),
        }),
      };
      models.set(c.id, m);
    }
    return {
      model: m.model,
      enabled: c.enabled,
      prices: pricesOf(c),
      contextLimitTokens:
        c.context_limit ?? knownContextLimit(c.provider, c.model) ?? DEFAULT_CONTEXT_LIMIT_TOKENS,
      ...(c.compact_threshold_percent !== null && {
        compactThresholdPercent: c.compact_threshold_percent,
      }),
    };
  };
}
