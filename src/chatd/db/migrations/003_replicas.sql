-- Replicas (issue 5): the shared secret replicas show each other on internal routes (the
-- live parts relay), made once by the first replica that starts; user tokens never open them.
CREATE TABLE replica_secret (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  secret     text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Dead replicas' rows are swept by heartbeat age.
CREATE INDEX workers_heartbeat ON workers (heartbeat_at);
