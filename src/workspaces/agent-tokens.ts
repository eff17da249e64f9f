// Agent tokens of dial-out workspaces (table `workspace_agent_tokens`): what an agent shows when
// it dials the server. A token is 32 random bytes (base64url), shown once to whoever minted it;
// only its SHA-256 is stored, so a copy of the database opens no connection. A revoked token is
// refused from then on, and revoking also ends the agent's live connection, wherever it is held.

import { createHash, randomBytes, randomUUID } from "node:crypto";
import { dropAgentConnection } from "../chatd/dialout/index.ts";
import type { Queryable } from "../chatd/db/index.ts";

export const AGENT_TOKEN_BYTES = 32;

function hashOf(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Mints a token for the workspace and answers it (the only time it is seen in clear). */
export async function mintAgentToken(q: Queryable, workspaceId: string): Promise<string> {
  const token = randomBytes(AGENT_TOKEN_BYTES).toString("base64url");
  await q.query(
    "INSERT INTO workspace_agent_tokens (id, workspace_id, token_hash) VALUES ($1, $2, $3)",
    [randomUUID(), workspaceId, hashOf(token)],
  );
  return token;
}

/**
 * Revokes every token of the workspace and closes its agent's connection (its holder is
 * notified; in a transaction, on commit). An agent that dials again with one is refused.
 */
export async function revokeAgentTokens(q: Queryable, workspaceId: string): Promise<void> {
  await q.query(
    "UPDATE workspace_agent_tokens SET revoked_at = now() WHERE workspace_id = $1 AND revoked_at IS NULL",
    [workspaceId],
  );
  await dropAgentConnection(q, workspaceId);
}

/** The token's row when it is known and not revoked. */
export async function agentTokenFor(
  q: Queryable,
  token: string,
): Promise<{ tokenId: string; workspaceId: string } | undefined> {
  const r = await q.query<{ id: string; workspace_id: string }>(
    "SELECT id, workspace_id FROM workspace_agent_tokens WHERE token_hash = $1 AND revoked_at IS NULL",
    [hashOf(token)],
  );
  const row = r.rows[0];
  return row && { tokenId: row.id, workspaceId: row.workspace_id };
}

/** The workspace the token opens, or undefined when it is unknown or revoked. */
export async function workspaceForAgentToken(
  q: Queryable,
  token: string,
): Promise<string | undefined> {
  return (await agentTokenFor(q, token))?.workspaceId;
}

/** What a token looks like: 32 bytes in base64url (43 characters). */
const TOKEN_LIKE_RE = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;
/** Candidates looked up at most: a state is not a haystack to search without bound. */
const MAX_TOKEN_CANDIDATES = 1_000;

/**
 * The workspace's own agent tokens, revoked ones included, that appear in `text` (a Terraform
 * state a template stored one in): found by hashing what looks like a token, since only hashes
 * are stored. A build scrubs them from its log, where Terraform's plan would print them.
 */
export async function agentTokensIn(
  q: Queryable,
  workspaceId: string,
  text: string,
): Promise<string[]> {
  const candidates = [...new Set(text.match(TOKEN_LIKE_RE) ?? [])].slice(0, MAX_TOKEN_CANDIDATES);
  if (candidates.length === 0) return [];
  const hex = (c: string) => hashOf(c).toString("hex");
  const r = await q.query<{ h: string }>(
    `SELECT encode(token_hash, 'hex') AS h FROM workspace_agent_tokens
     WHERE workspace_id = $1 AND encode(token_hash, 'hex') = ANY($2::text[])`,
    [workspaceId, candidates.map(hex)],
  );
  const found = new Set(r.rows.map((row) => row.h));
  return candidates.filter((c) => found.has(hex(c)));
}
