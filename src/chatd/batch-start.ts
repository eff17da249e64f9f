// The start of a tool batch, in one round trip, right before anything reaches the agent:
// whether the chat's owner may still use the workspace (workspace-access.ts), the audit log's
// `tool.call` entries of the calls about to be sent (audit-tool-calls.ts: written only when the
// workspace is usable and an agent will be sent them), and how long ago the message holding
// the calls was committed, on the database clock (the contract's age header).

import { toolCallAuditDetails } from "./audit-tool-calls.ts";
import type { Chat } from "./chats.ts";
import type { Queryable } from "./db/index.ts";
import type { ChatMessage, ToolCallPart } from "./messages.ts";
import {
  accessOf,
  ACCESS_LOST_SQL,
  ACCESS_ROW_SQL,
  type AccessRow,
  type WorkspaceAccess,
} from "./workspace-access.ts";

export async function startBatch(
  q: Queryable,
  chat: Chat,
  message: ChatMessage,
  calls: ToolCallPart[],
  o: { audit: boolean },
): Promise<{ access: WorkspaceAccess; ageMs: number }> {
  const details = o.audit ? toolCallAuditDetails(message.id, calls) : [];
  const r = await q.query<AccessRow & { found: boolean; age_ms: number | null }>(
    `WITH a AS (${ACCESS_ROW_SQL}),
     logged AS (
       INSERT INTO audit_log (user_id, action, target, details, user_agent)
       SELECT $1, 'tool.call', $3, d::jsonb, 'chatd' FROM unnest($4::text[]) AS d
       WHERE NOT EXISTS (SELECT 1 FROM a WHERE ${ACCESS_LOST_SQL})
       RETURNING 1)
     SELECT a.disabled, a.shared, a.owner_id, a.disabled IS NOT NULL AS found,
       (SELECT (extract(epoch FROM now() - created_at) * 1000)::float8 FROM chat_messages
        WHERE id = $5) AS age_ms,
       (SELECT count(*) FROM logged) AS logged
     FROM (SELECT 1) one LEFT JOIN a ON true`,
    [chat.ownerId, chat.workspaceId, chat.id, details, message.id],
  );
  const row = r.rows[0]!;
  return { access: accessOf(chat, row.found ? row : undefined), ageMs: row.age_ms ?? 0 };
}
