// STAND-IN for the dialout branch's module of the same name and signatures (delete this file
// at the merge and take theirs): the agent token of a template workspace, minted per start,
// stored only as its SHA-256, revoked at stop and delete. One difference theirs does not need:
// revoking here also forgets the stand-in's connection (agent-standin.ts), since a stand-in
// agent never disconnects by itself.

import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Queryable } from "../chatd/db/index.ts";

const TOKEN_BYTES = 32;

function hash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** A new token for the workspace's agent; the secret is returned and never stored. */
export async function mintAgentToken(q: Queryable, workspaceId: string): Promise<string> {
  const token = randomBytes(TOKEN_BYTES).toString("base64url");
  await q.query(
    "INSERT INTO workspace_agent_tokens (id, workspace_id, token_hash) VALUES ($1, $2, $3)",
    [randomUUID(), workspaceId, hash(token)],
  );
  return token;
}

/** Ends every token of the workspace at once. */
export async function revokeAgentTokens(q: Queryable, workspaceId: string): Promise<void> {
  await q.query(
    "UPDATE workspace_agent_tokens SET revoked_at = now() WHERE workspace_id = $1 AND revoked_at IS NULL",
    [workspaceId],
  );
  // Stand-in only: the agent of a revoked token counts as gone.
  await q.query("DELETE FROM agent_connections WHERE workspace_id = $1", [workspaceId]);
  await q.query(
    "UPDATE workspaces SET agent_url = NULL, agent_token = NULL WHERE id = $1 AND template_id IS NOT NULL",
    [workspaceId],
  );
}

/** The workspace a live (unrevoked) token belongs to. */
export async function workspaceForAgentToken(
  q: Queryable,
  token: string,
): Promise<string | undefined> {
  const r = await q.query<{ workspace_id: string }>(
    "SELECT workspace_id FROM workspace_agent_tokens WHERE token_hash = $1 AND revoked_at IS NULL",
    [hash(token)],
  );
  return r.rows[0]?.workspace_id;
}
