-- The prompt (issue 13). Each chat keeps the snapshot of its workspace's context (environment,
-- instruction files, the organisation's instructions) taken before its first model step, so a
-- prompt never changes under a running conversation; a refresh replaces it. Admins keep the
-- organisation-wide instructions in `settings`.

CREATE TABLE chat_contexts (
  chat_id     uuid PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
  -- src/chatd/prompt/context.ts `ContextSnapshot`: written whole, never patched.
  snapshot    jsonb NOT NULL,
  captured_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE settings (
  key        text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_by uuid REFERENCES users (id) ON DELETE SET NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Compaction: the share of the context limit (percent) past which a chat compacts; NULL means
-- the default (70); 100 turns compaction off.
ALTER TABLE model_configs ADD COLUMN compact_threshold_percent integer
  CHECK (compact_threshold_percent BETWEEN 1 AND 100);

-- What each model step's prompt took (input + cache read + cache write tokens, as the provider
-- reported them) and the limit it was measured against; NULL for other messages.
ALTER TABLE chat_messages ADD COLUMN prompt_tokens bigint;
ALTER TABLE chat_messages ADD COLUMN context_limit bigint;
-- A compaction's summary: the model's prompt starts here; earlier messages stay for people.
ALTER TABLE chat_messages ADD COLUMN boundary boolean NOT NULL DEFAULT false;
CREATE INDEX chat_messages_boundary ON chat_messages (chat_id, id) WHERE boundary AND NOT deleted;

-- A compaction was asked for (by the user, or by a provider refusing a prompt as too long):
-- the chat's next action is one. Cleared by the boundary's commit and by an interruption.
ALTER TABLE chats ADD COLUMN compact_requested boolean NOT NULL DEFAULT false;
