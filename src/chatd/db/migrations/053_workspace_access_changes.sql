-- A replica holds, with a workspace's agent address, who may use the workspace (its owner and
-- whether it is shared), to ask a new chat's agent for its context while the chat's create
-- statement runs (src/chatd/worker/worker.ts): a change of either notifies every replica too.
-- The statement still decides; what is held only decides whether to ask ahead of it.
DROP TRIGGER workspaces_agent_changed ON workspaces;
CREATE TRIGGER workspaces_agent_changed
  AFTER INSERT OR UPDATE OF agent_url, agent_token, url_checked_as, owner_id, shared
  OR DELETE ON workspaces
  FOR EACH STATEMENT EXECUTE FUNCTION tether_config_changed();
