-- Which replica holds which dial-out agent's connection (src/chatd/dialout/registry.ts). Written
-- when an agent connects, deleted when its connection ends or its token is revoked, and gone
-- with its replica's `workers` row (a graceful stop, or the sweep of a dead replica).
CREATE TABLE agent_connections (
  workspace_id     uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
  worker_id        uuid NOT NULL REFERENCES workers (id) ON DELETE CASCADE,
  -- One connection of the holder: a newer connection of the same workspace replaces the row,
  -- and only the connection that wrote a row deletes it.
  connection_id    uuid NOT NULL,
  token_id         uuid NOT NULL REFERENCES workspace_agent_tokens (id) ON DELETE CASCADE,
  -- The agent process (random per process, the same on its reconnects).
  agent_instance   text NOT NULL,
  -- now() minus the uptime the agent reported, on the database clock: only a duration crossed.
  agent_started_at timestamptz NOT NULL,
  connected_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX agent_connections_worker ON agent_connections (worker_id);
