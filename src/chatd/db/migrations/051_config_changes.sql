-- Replicas hold what they read of rows an admin rarely changes (src/chatd/config-cache.ts): a
-- model's configuration, a workspace's agent address. A change of such a row notifies every
-- replica, whatever statement made it, and each drops what it held of that table.
CREATE OR REPLACE FUNCTION tether_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('tether_config', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TRIGGER model_configs_changed AFTER INSERT OR UPDATE OR DELETE ON model_configs
  FOR EACH STATEMENT EXECUTE FUNCTION tether_config_changed();

CREATE TRIGGER workspaces_agent_changed
  AFTER INSERT OR UPDATE OF agent_url, agent_token, url_checked_as OR DELETE ON workspaces
  FOR EACH STATEMENT EXECUTE FUNCTION tether_config_changed();
