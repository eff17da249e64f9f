// Usage (CHATD.md 9): model runtime from assistant messages, compaction boundaries and
// interrupted compactions' usage records, tool runtime and billed calls from the
// tool-batch-usage records, tokens and cost from every message — per chat, and as a report
// grouped by user, chat, hour or day (with template workspaces' running time). Deleted messages count too: discarding history by an edit does
// not undo what was spent. Usage belongs to the chat's owner.

import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ApiContext } from "./context.ts";
import { caller, isStaff } from "./auth.ts";
import { readableChat } from "./chat-access.ts";
import { IdParams, parse } from "./errors.ts";
import { emailsOf, workspaceTime } from "./workspace-usage.ts";

export interface ChatUsage {
  runtime_ms: number;
  model_runtime_ms: number;
  tool_runtime_ms: number;
  billed_calls: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
}

/**
 * What a report row is keyed by, as SQL over `m` (chat_messages), `c` (chats) and `u` (the
 * chat's owner), and the name a person reads it by (the user's email, the chat's title).
 */
const GROUPS = {
  user: { key: "c.owner_id::text", field: "user_id", label: "u.email", labelField: "email" },
  chat: { key: "c.id::text", field: "chat_id", label: "c.title", labelField: "title" },
  hour: {
    key: `to_char(date_trunc('hour', m.created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD"T"HH24:00:00"Z"')`,
    field: "hour",
    label: "NULL",
    labelField: undefined,
  },
  day: {
    key: `to_char(date_trunc('day', m.created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')`,
    field: "day",
    label: "NULL",
    labelField: undefined,
  },
} as const;
type GroupBy = keyof typeof GROUPS;

/** The billing record of a tool batch: role tool, visibility model, a tool-batch-usage part. */
const USAGE_RECORD = `m.role = 'tool' AND m.visibility = 'model' AND m.content @> '[{"type": "tool-batch-usage"}]'`;
/** An interrupted compaction's model time: role system, visibility model, a compaction-usage part. */
const COMPACTION_USAGE_RECORD = `m.role = 'system' AND m.visibility = 'model' AND m.content @> '[{"type": "compaction-usage"}]'`;
/** Model time: model steps (assistant messages), compactions (boundaries) and interrupted ones. */
const MODEL_TIME = `m.role = 'assistant' OR m.boundary OR (${COMPACTION_USAGE_RECORD})`;

/**
 * One statement for every usage question: totals per group over the messages of the chats
 * the filters select. Sums of int4 are int8, which the drivers answer as decimal strings.
 */
function usageSql(group: GroupBy): string {
  return `SELECT ${GROUPS[group].key} AS key, MAX(${GROUPS[group].label}) AS label,
      COALESCE(SUM(m.runtime_ms) FILTER (WHERE ${MODEL_TIME}), 0) AS model_runtime_ms,
      COALESCE(SUM(m.runtime_ms) FILTER (WHERE ${USAGE_RECORD}), 0) AS tool_runtime_ms,
      COALESCE(SUM(b.billed_calls), 0) AS billed_calls,
      COALESCE(SUM(m.input_tokens), 0) AS input_tokens,
      COALESCE(SUM(m.output_tokens), 0) AS output_tokens,
      COALESCE(SUM(m.cost_micros), 0) AS cost_micros
    FROM chat_messages m JOIN chats c ON c.id = m.chat_id JOIN users u ON u.id = c.owner_id
    CROSS JOIN LATERAL (
      SELECT SUM((p.part ->> 'billed_calls')::bigint) AS billed_calls
      FROM jsonb_array_elements(m.content) AS p(part)
      WHERE ${USAGE_RECORD} AND p.part ->> 'type' = 'tool-batch-usage') b
    WHERE ($1::uuid IS NULL OR m.chat_id = $1)
      AND ($2::uuid IS NULL OR c.owner_id = $2)
      AND ($3::timestamptz IS NULL OR m.created_at >= $3)
      AND ($4::timestamptz IS NULL OR m.created_at < $4)
    GROUP BY 1 ORDER BY 1`;
}

interface UsageFilter {
  chatId?: string;
  ownerId?: string;
  from?: Date;
  to?: Date;
}

async function usageRows(
  ctx: ApiContext,
  group: GroupBy,
  f: UsageFilter,
): Promise<{ key: string; label: string | null; usage: ChatUsage }[]> {
  const r = await ctx.db.query<Record<string, string>>(usageSql(group), [
    f.chatId ?? null,
    f.ownerId ?? null,
    f.from ?? null,
    f.to ?? null,
  ]);
  return r.rows.map((row) => {
    const model = Number(row.model_runtime_ms);
    const tool = Number(row.tool_runtime_ms);
    return {
      key: row.key!,
      label: row.label ?? null,
      usage: {
        runtime_ms: model + tool,
        model_runtime_ms: model,
        tool_runtime_ms: tool,
        billed_calls: Number(row.billed_calls),
        input_tokens: Number(row.input_tokens),
        output_tokens: Number(row.output_tokens),
        cost_micros: Number(row.cost_micros),
      },
    };
  });
}

const ZERO: ChatUsage = {
  runtime_ms: 0,
  model_runtime_ms: 0,
  tool_runtime_ms: 0,
  billed_calls: 0,
  input_tokens: 0,
  output_tokens: 0,
  cost_micros: 0,
};

export async function chatUsage(ctx: ApiContext, chatId: string): Promise<ChatUsage> {
  const [row] = await usageRows(ctx, "chat", { chatId });
  return row?.usage ?? { ...ZERO };
}

/** An instant: an ISO 8601 date-time with its offset, or a date (midnight UTC). */
const Instant = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()])
  .transform((s) => new Date(s));

export const ReportQuery = z
  .object({
    from: Instant.optional(),
    to: Instant.optional(),
    group_by: z.enum(["user", "chat", "hour", "day"]).default("user"),
  })
  .refine((q) => !q.from || !q.to || q.from < q.to, {
    message: "must be after from",
    path: ["to"],
  });

export function usageRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get("/api/v1/chats/:id/usage", async (request) => {
    const { id } = parse(IdParams, request.params, "path");
    await readableChat(ctx, request, id);
    return chatUsage(ctx, id);
  });

  // Admins see everyone's usage, members their own; `to` is exclusive. Rows by user, day or
  // hour also carry the template workspaces' running time (workspace-usage.ts).
  app.get("/api/v1/usage", async (request) => {
    const { user } = caller(request);
    const q = parse(ReportQuery, request.query, "query");
    const filter = {
      ...(!isStaff(user) && { ownerId: user.id }),
      ...(q.from && { from: q.from }),
      ...(q.to && { to: q.to }),
    };
    const rows = await usageRows(ctx, q.group_by, filter);
    const { field, labelField } = GROUPS[q.group_by];
    if (q.group_by === "chat") {
      return {
        rows: rows.map((r) => ({
          [field]: r.key,
          ...(labelField !== undefined && { [labelField]: r.label ?? "" }),
          ...r.usage,
        })),
      };
    }
    const running = await workspaceTime(ctx.db, q.group_by, filter);
    const missing = [...running.keys()].filter((k) => !rows.some((r) => r.key === k));
    const emails =
      q.group_by === "user" ? await emailsOf(ctx.db, missing) : new Map<string, string>();
    for (const key of missing)
      rows.push({ key, label: emails.get(key) ?? null, usage: { ...ZERO } });
    if (missing.length > 0) rows.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return {
      rows: rows.map((r) => ({
        [field]: r.key,
        ...(labelField !== undefined && { [labelField]: r.label ?? "" }),
        ...r.usage,
        workspace_runtime_ms: running.get(r.key) ?? 0,
      })),
    };
  });
}
