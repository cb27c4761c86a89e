-- Who made each API key: 'operator' (the account's first key, POST /admin/v1/tenants), 'api'
-- (POST /api-keys with a key) or 'user' (the dashboard): then the user, and their address at
-- the time, which stays when the user is removed. NULL: made before this was recorded.
ALTER TABLE api_keys
    ADD COLUMN created_by text CHECK (created_by IN ('operator', 'api', 'user')),
    ADD COLUMN created_by_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN created_by_email text,
    ADD CHECK ((created_by = 'user') = (created_by_email IS NOT NULL));
-- A user's keys (removing a member offers to revoke them), and the cascade of removing a user.
CREATE INDEX api_keys_created_by_user ON api_keys (created_by_user_id) WHERE created_by_user_id IS NOT NULL;
