-- A template's cap on how long its workspaces may sit idle (`max_ttl_ms`, set by admins; null: no
-- cap). A member's workspace may not ask for a longer TTL, nor for 0 (never stop); the template's
-- own default_ttl_ms stays within it. Admins and owners are not held to it (src/api/templates.ts,
-- src/api/template-workspaces.ts).
ALTER TABLE templates ADD COLUMN max_ttl_ms bigint CHECK (max_ttl_ms >= 1000);
