-- The server's local workspace runs commands as the server's own OS user, so it belongs to the
-- owner (the first user) and others use it only when an admin shares it. `local` marks it
-- (before, it was the ownerless row named "local"); the first user created becomes its owner
-- when the server started before any user existed.
ALTER TABLE workspaces ADD COLUMN local boolean NOT NULL DEFAULT false;
UPDATE workspaces SET local = true
 WHERE id = (SELECT id FROM workspaces WHERE name = 'local' AND owner_id IS NULL
              ORDER BY created_at, id LIMIT 1);
CREATE UNIQUE INDEX workspaces_one_local ON workspaces (local) WHERE local;
UPDATE workspaces SET owner_id = (SELECT id FROM users WHERE role = 'owner' ORDER BY created_at, id LIMIT 1)
 WHERE local AND owner_id IS NULL;

CREATE FUNCTION tether_local_workspace_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE workspaces SET owner_id = NEW.id WHERE local AND owner_id IS NULL;
  RETURN NULL;
END
$$;
CREATE TRIGGER users_own_local_workspace AFTER INSERT ON users
  FOR EACH ROW WHEN (NEW.role = 'owner') EXECUTE FUNCTION tether_local_workspace_owner();
