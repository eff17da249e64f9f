-- Accounts and governance (issue 6): the owner role, browser sessions, model prices and
-- switches, shared workspaces, and the audit log (who did what, including in chats).

-- Roles: owner (the first user; only owners make or unmake owners), admin, member. The first
-- user of an older database was an admin; it becomes the owner.
ALTER TABLE users DROP CONSTRAINT IF EXISTS users_role_check;
ALTER TABLE users ADD CONSTRAINT users_role_check CHECK (role IN ('owner', 'admin', 'member'));
UPDATE users SET role = 'owner'
 WHERE id = (SELECT id FROM users ORDER BY created_at, id LIMIT 1)
   AND NOT EXISTS (SELECT 1 FROM users WHERE role = 'owner');

-- A login's token is a browser session too (sent as a cookie); logout deletes it.
ALTER TABLE api_tokens ADD COLUMN kind text NOT NULL DEFAULT 'api'
  CHECK (kind IN ('api', 'session'));

-- Prices are integer micro-dollars per million tokens; a disabled model is neither listed to
-- members nor accepted for a new chat.
ALTER TABLE model_configs
  ADD COLUMN enabled boolean NOT NULL DEFAULT true,
  ADD COLUMN input_price_per_mtok_micros bigint NOT NULL DEFAULT 0
    CHECK (input_price_per_mtok_micros >= 0),
  ADD COLUMN output_price_per_mtok_micros bigint NOT NULL DEFAULT 0
    CHECK (output_price_per_mtok_micros >= 0),
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

-- A workspace an admin shares is usable by everyone, like the ownerless local one.
ALTER TABLE workspaces ADD COLUMN shared boolean NOT NULL DEFAULT false;

CREATE TABLE audit_log (
  id         bigserial PRIMARY KEY,
  -- The acting user; null for a failed sign-in or a deleted user.
  user_id    uuid REFERENCES users (id) ON DELETE SET NULL,
  action     text NOT NULL,
  target     text,
  -- Never a secret: no password, token, API key or agent token goes in here.
  details    jsonb NOT NULL DEFAULT '{}',
  ip         text,
  user_agent text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_recent ON audit_log (id DESC);
