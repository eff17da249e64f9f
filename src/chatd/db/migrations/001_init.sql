-- The control plane's schema (CHATD.md 2). chatd keeps no execution table: a committed tool
-- call in an assistant message is the durable record of intent; its result is a tool message.

CREATE TABLE users (
  id            uuid PRIMARY KEY,
  email         text NOT NULL UNIQUE,
  name          text NOT NULL DEFAULT '',
  role          text NOT NULL CHECK (role IN ('admin', 'member')),
  password_hash text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
  id           uuid PRIMARY KEY,
  user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name         text NOT NULL,
  -- SHA-256 of the secret, hex; the secret itself is shown once and never stored.
  token_hash   text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz
);

CREATE TABLE workspaces (
  id          uuid PRIMARY KEY,
  owner_id    uuid REFERENCES users (id) ON DELETE SET NULL,
  name        text NOT NULL,
  agent_url   text NOT NULL,
  agent_token text,
  is_default  boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_configs (
  id            uuid PRIMARY KEY,
  provider      text NOT NULL,
  model         text NOT NULL,
  base_url      text,
  api_key       text,
  context_limit integer,
  is_default    boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE chats (
  id                 uuid PRIMARY KEY,
  owner_id           uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  workspace_id       uuid REFERENCES workspaces (id) ON DELETE SET NULL,
  model_config_id    uuid REFERENCES model_configs (id) ON DELETE SET NULL,
  title              text NOT NULL DEFAULT '',
  status             text NOT NULL DEFAULT 'waiting'
                     CHECK (status IN ('waiting', 'running', 'interrupting', 'error')),
  archived           boolean NOT NULL DEFAULT false,
  -- The ownership pair: the replica and the runner that drive the chat now.
  worker_id          uuid,
  runner_id          uuid,
  -- Bumped first by every transition; history_version is the snapshot of the latest
  -- history change; generation_attempt resets to 0 whenever history changes.
  snapshot_version   bigint NOT NULL DEFAULT 0,
  history_version    bigint NOT NULL DEFAULT 0,
  queue_version      bigint NOT NULL DEFAULT 0,
  generation_attempt integer NOT NULL DEFAULT 0,
  retry_state        jsonb,
  last_error         jsonb,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chats_owner ON chats (owner_id, created_at DESC);
CREATE INDEX chats_runnable ON chats (status) WHERE status IN ('running', 'interrupting');

-- The lease: a runner that stops renewing it loses the chat once it is stale.
CREATE TABLE chat_heartbeats (
  chat_id      uuid PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
  runner_id    uuid NOT NULL,
  heartbeat_at timestamptz NOT NULL
);

CREATE TABLE chat_messages (
  -- Increases within a chat: every transition locks the chat row before inserting.
  id            bigserial PRIMARY KEY,
  chat_id       uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  role          text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  visibility    text NOT NULL CHECK (visibility IN ('user', 'model', 'both')),
  content       jsonb NOT NULL,
  created_by    uuid,
  created_at    timestamptz NOT NULL DEFAULT now(),
  revision      integer NOT NULL DEFAULT 0,
  deleted       boolean NOT NULL DEFAULT false,
  input_tokens  integer NOT NULL DEFAULT 0,
  output_tokens integer NOT NULL DEFAULT 0,
  runtime_ms    integer NOT NULL DEFAULT 0,
  cost_micros   integer NOT NULL DEFAULT 0
);
CREATE INDEX chat_messages_chat ON chat_messages (chat_id, id) WHERE NOT deleted;

CREATE TABLE chat_queued_messages (
  id         bigserial PRIMARY KEY,
  chat_id    uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  content    jsonb NOT NULL,
  created_by uuid,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_queued_messages_chat ON chat_queued_messages (chat_id, id);

-- Replicas: where the owner of a chat can be reached for live parts (issue 5).
CREATE TABLE workers (
  id           uuid PRIMARY KEY,
  address      text,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
