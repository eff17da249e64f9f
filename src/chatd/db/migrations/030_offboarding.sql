-- Offboarding (issue 11): a disabled user signs in no more and their tokens are deleted when
-- they are disabled (src/api/users.ts); an API token may expire. A session's idle time is
-- measured from last_used_at (or created_at), both written on the API's clock.
ALTER TABLE users ADD COLUMN disabled_at timestamptz;
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz;
