-- Dial-out agents (issue 12): a workspace whose agent dials the server has no agent URL, and
-- its agents authenticate with tokens minted for it. Only a token's SHA-256 is kept; a revoked
-- token stays (for the record) and is refused.
ALTER TABLE workspaces ALTER COLUMN agent_url DROP NOT NULL;

CREATE TABLE workspace_agent_tokens (
  id           uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  token_hash   bytea NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);

CREATE INDEX workspace_agent_tokens_workspace ON workspace_agent_tokens (workspace_id);
