-- Workspace URLs (issue 11). `url_checked_as` is the role the agent URL was checked as when it
-- was registered or last changed: 'member' (the server connects only to public addresses of it,
-- checked again on every connection), 'admin' (any address), NULL (set by the server itself:
-- the local workspace; any address). Existing URLs are taken as checked by their owner's role.
ALTER TABLE workspaces ADD COLUMN url_checked_as text
  CHECK (url_checked_as IN ('member', 'admin'));
UPDATE workspaces w
   SET url_checked_as = CASE WHEN u.role IN ('owner', 'admin') THEN 'admin' ELSE 'member' END
  FROM users u
 WHERE u.id = w.owner_id;

-- Credentials in an agent URL (http://user:password@host) were never sent (the agent client
-- takes only host, port and path) but were stored, shown and audited: they are dropped.
UPDATE workspaces
   SET agent_url = regexp_replace(agent_url, '^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@', '\1')
 WHERE agent_url ~ '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@';
UPDATE audit_log
   SET details = jsonb_set(details, '{agent_url}', to_jsonb(
         regexp_replace(details->>'agent_url', '^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@', '\1')))
 WHERE details->>'agent_url' ~ '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@';
