-- Replicas hold the bearer check's token lookups for a few seconds (src/api/token-cache.ts): a
-- change of a token or of its user (a revoked token, a logout, a disabled user, a role change,
-- a deletion) notifies every replica on `tether_config` with the table's name, whatever
-- statement made it, and each drops every token it holds. The refresh of a token's last_used_at
-- alone does not: it is no revocation, and it comes once a minute per token in use. (A row
-- trigger compares the rows; Postgres sends one of a transaction's equal notifications.)
-- tether_config_changed() is migration 051's.
CREATE TRIGGER api_tokens_updated AFTER UPDATE ON api_tokens
  FOR EACH ROW
  WHEN ((to_jsonb(OLD) - 'last_used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_at'))
  EXECUTE FUNCTION tether_config_changed();

CREATE TRIGGER api_tokens_removed AFTER DELETE OR TRUNCATE ON api_tokens
  FOR EACH STATEMENT EXECUTE FUNCTION tether_config_changed();

CREATE TRIGGER users_changed AFTER UPDATE OR DELETE OR TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION tether_config_changed();
