// The start of a tool batch, right before anything reaches the agent: whether the chat's owner
// may still use the workspace (workspace-access.ts), the audit log's `tool.call` entries of the
// calls about to be sent (audit-tool-calls.ts: written only when the workspace is usable and an
// agent will be sent them), and how long ago the message holding the calls was committed, on
// the database clock (the contract's age header). A batch's first start rides on the commit of
// the model step that made the calls (batchStartPart: the message is then 0 ms old); a start
// after that (a retried or taken-over batch) is a statement of its own (startBatch). A start
// that finds the workspace lost refuses the batch (refuseBatch).

import type { Logger } from "pino";
import { toolCallAuditDetails } from "./audit-tool-calls.ts";
import { batchMessages } from "./batch.ts";
import type { Chat, Fence } from "./chats.ts";
import type { Database, Queryable } from "./db/index.ts";
import type { ChatMessage, ToolCallPart } from "./messages.ts";
import { workspaceUnavailableResult } from "./tools/index.ts";
import { finishError, type ChangePart, type HeldChat } from "./transitions/index.ts";
import {
  accessOf,
  accessLostSql,
  accessRowSql,
  lostWorkspaceWords,
  type AccessRow,
  type WorkspaceAccess,
} from "./workspace-access.ts";

export interface BatchStart {
  access: WorkspaceAccess;
  ageMs: number;
}

/** The audit entries of `calls` of message `messageId` (SQL), while the access `a` holds. */
function auditSql(o: {
  owner: string;
  chat: string;
  details: string;
  messageId: string;
  from?: string;
}): string {
  return `INSERT INTO audit_log (user_id, action, target, details, user_agent)
       SELECT ${o.owner}, 'tool.call', ${o.chat}::text,
         jsonb_build_object('message_id', ${o.messageId}::text) || d::jsonb, 'chatd'
       FROM ${o.from ? `${o.from} CROSS JOIN ` : ""}unnest(${o.details}::text[]) AS d
       WHERE NOT EXISTS (SELECT 1 FROM a WHERE ${accessLostSql(o.owner)})`;
}

/** A batch's start as its own statement (a batch started again, or not started with its calls). */
export async function startBatch(
  q: Queryable,
  chat: Chat,
  message: ChatMessage,
  calls: ToolCallPart[],
  o: { audit: boolean },
): Promise<BatchStart> {
  const details = o.audit ? toolCallAuditDetails(calls) : [];
  const r = await q.query<AccessRow & { found: boolean; age_ms: number | null }>(
    `WITH a AS (${accessRowSql("$1", "$2")}),
     logged AS (${auditSql({ owner: "$1", chat: "$3", details: "$4", messageId: "$5::bigint" })} RETURNING 1)
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

/**
 * The start of the batch of `calls`, riding on the commit of the assistant message that makes
 * them (the fenced write's `c` and `m`); its answer is read by startedWith.
 */
export function batchStartPart(calls: ToolCallPart[], o: { audit: boolean }): ChangePart {
  return (p) => {
    const details = p(o.audit ? toolCallAuditDetails(calls) : []);
    return {
      ctes: [
        `a AS (SELECT x.* FROM c CROSS JOIN LATERAL (${accessRowSql("c.owner_id", "c.workspace_id")}) x)`,
        `logged AS (${auditSql({ owner: "c.owner_id", chat: "c.id", details, messageId: "(SELECT max(id) FROM m)", from: "c" })})`,
      ],
      answer: `(SELECT a.disabled FROM a) AS batch_owner_disabled,
        (SELECT a.shared FROM a) AS batch_shared, (SELECT a.owner_id FROM a) AS batch_owner_id`,
    };
  };
}

/** The access batchStartPart found, from the statement's answer. */
export function startedWith(chat: Chat, also: Record<string, unknown>): WorkspaceAccess {
  const disabled = also.batch_owner_disabled as boolean | null;
  return accessOf(
    chat,
    disabled === null
      ? undefined
      : {
          disabled,
          shared: also.batch_shared as boolean | null,
          owner_id: also.batch_owner_id as string | null,
        },
  );
}

/**
 * The chat's owner may no longer use its workspace: no call of the batch is sent, each gets a
 * result saying why, and the turn ends in error with them, in one transaction (fenced: a stale
 * task writes nothing).
 */
export async function refuseBatch(
  deps: { db: Database; log: Logger; toolResultBudgetBytes: number; held?: HeldChat },
  fence: Fence,
  chat: Chat,
  calls: ToolCallPart[],
  why: "unshared" | "owner_disabled",
): Promise<void> {
  const words = lostWorkspaceWords(why);
  const results = calls.map((c) => workspaceUnavailableResult(c.toolName, words.note));
  deps.log.warn(
    { chat_id: chat.id, workspace_id: chat.workspaceId, calls: calls.length, why },
    "tool calls not sent: the workspace is no longer available to the chat's owner",
  );
  const messages = batchMessages(
    calls,
    results,
    deps.toolResultBudgetBytes,
    calls.map(() => undefined),
  );
  await finishError(deps.db, fence, words.error, messages, deps.held);
}
