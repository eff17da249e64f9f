-- Login throttling (src/api/auth.ts) shared by every replica: failed logins per key
-- (`email:<email>`, `ip:<address>`) live here, not in each process, so running more replicas
-- does not give an attacker more attempts. Times are milliseconds on the API's injected clock.
CREATE TABLE login_failures (
  key        text PRIMARY KEY,
  count      integer NOT NULL CHECK (count >= 0),
  last_at_ms bigint NOT NULL
);

-- Each counted attempt deletes the rows idle past the longest delay; this finds them without a scan.
CREATE INDEX login_failures_idle ON login_failures (last_at_ms);
