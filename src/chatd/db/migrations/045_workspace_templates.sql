-- Workspaces from templates (issue 12): Terraform templates and their versions, builds as
-- durable jobs (one active build per workspace, leased like chats), their logs, the Terraform
-- state a workspace's builds hand on, the intervals its compute ran (usage), and the lease of
-- the one lifecycle loop that stops idle workspaces.

CREATE TABLE templates (
  id             uuid PRIMARY KEY,
  name           text NOT NULL UNIQUE,
  description    text NOT NULL DEFAULT '',
  -- How long a running workspace may sit idle before it is stopped; 0 = never.
  default_ttl_ms bigint NOT NULL CHECK (default_ttl_ms >= 0),
  -- The newest version: what a workspace's next start applies.
  version        integer NOT NULL DEFAULT 1,
  created_by     uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

-- A version's files never change after insert: a change of files is a new version.
CREATE TABLE template_versions (
  template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
  version     integer NOT NULL,
  files       jsonb NOT NULL,
  created_by  uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (template_id, version)
);

-- A template workspace has no agent URL: its agent dials out. The URL-registered workspaces
-- keep theirs and have no template.
ALTER TABLE workspaces ALTER COLUMN agent_url DROP NOT NULL;
ALTER TABLE workspaces
  ADD COLUMN template_id      uuid REFERENCES templates (id),
  -- The template version its compute runs now (set when a start is queued).
  ADD COLUMN template_version integer,
  -- null: the template's default_ttl_ms.
  ADD COLUMN ttl_ms           bigint CHECK (ttl_ms >= 0),
  -- The last activity recorded outright (a chat stream open, a process running, a turn
  -- beginning); chats' own updates count too, read where the deadline is computed.
  ADD COLUMN last_active_at   timestamptz,
  ADD COLUMN latest_build_id  uuid;

CREATE TABLE workspace_builds (
  id               uuid PRIMARY KEY,
  workspace_id     uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  transition       text NOT NULL CHECK (transition IN ('start', 'stop', 'delete')),
  reason           text NOT NULL CHECK (reason IN ('user', 'autostop', 'chat')),
  status           text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
  template_version integer NOT NULL,
  created_by       uuid REFERENCES users (id) ON DELETE SET NULL,
  -- The lease of a running build: the replica that runs it and its last renewal.
  worker_id        uuid,
  heartbeat_at     timestamptz,
  error            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  finished_at      timestamptz
);
-- One build at a time per workspace.
CREATE UNIQUE INDEX workspace_builds_one_active ON workspace_builds (workspace_id)
  WHERE status IN ('pending', 'running');
CREATE INDEX workspace_builds_pending ON workspace_builds (created_at) WHERE status = 'pending';
CREATE INDEX workspace_builds_history ON workspace_builds (workspace_id, created_at DESC);

-- A build's Terraform output in the order it came, the agent token scrubbed.
CREATE TABLE workspace_build_logs (
  id       bigserial PRIMARY KEY,
  build_id uuid NOT NULL REFERENCES workspace_builds (id) ON DELETE CASCADE,
  chunk    text NOT NULL
);
CREATE INDEX workspace_build_logs_build ON workspace_build_logs (build_id, id);

-- The Terraform state the next build starts from (it may hold the agent token).
CREATE TABLE workspace_states (
  workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
  state        text NOT NULL,
  build_id     uuid,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- When each workspace's compute ran: opened by a start that succeeded, closed by the stop or
-- delete that succeeded after it. No foreign key to the workspace: usage outlives it.
CREATE TABLE workspace_runs (
  id             bigserial PRIMARY KEY,
  workspace_id   uuid NOT NULL,
  workspace_name text NOT NULL,
  owner_id       uuid REFERENCES users (id) ON DELETE CASCADE,
  started_at     timestamptz NOT NULL,
  stopped_at     timestamptz
);
CREATE INDEX workspace_runs_open ON workspace_runs (workspace_id) WHERE stopped_at IS NULL;
CREATE INDEX workspace_runs_time ON workspace_runs (started_at);

-- The lifecycle loop runs on one replica at a time: whoever holds this lease.
CREATE TABLE workspace_lifecycle_lease (
  singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  worker_id    uuid NOT NULL,
  heartbeat_at timestamptz NOT NULL
);
