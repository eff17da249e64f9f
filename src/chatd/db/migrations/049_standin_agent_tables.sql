-- STAND-IN until the dialout branch merges (its migrations 040 and 041 make these tables):
-- the agent tokens of template workspaces (sha256 only) and the connection registry. Written
-- with IF NOT EXISTS so that, merged after 040/041, this file changes nothing; delete it at
-- the merge when no database has applied it yet.

CREATE TABLE IF NOT EXISTS workspace_agent_tokens (
  id           uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  token_hash   text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);

CREATE TABLE IF NOT EXISTS agent_connections (
  workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
  worker_id    uuid NOT NULL,
  connected_at timestamptz NOT NULL DEFAULT now()
);
