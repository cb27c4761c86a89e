-- Two-factor sign-in (TOTP, RFC 6238) for the dashboard's users and the console's operators,
-- and an account's rule that every member has it (docs/operations.md, "Security").
-- The secrets are sealed (AES-256-GCM under a key derived from the master key, bound to the
-- row); the recovery codes are kept only as SHA-256 digests, each removed when used; the last
-- time step a code was accepted at is kept so that no code is accepted twice.
-- (Adding nullable columns, or one with a constant default, rewrites no row.)
ALTER TABLE users ADD COLUMN totp_secret bytea;          -- sealed; NULL: no second factor
ALTER TABLE users ADD COLUMN totp_pending bytea;         -- sealed; an enrolment begun, not confirmed
ALTER TABLE users ADD COLUMN totp_enabled_at timestamptz;
ALTER TABLE users ADD COLUMN totp_last_step bigint;      -- the step of the last code accepted
ALTER TABLE users ADD COLUMN recovery_codes bytea[];     -- digests of the unused recovery codes

ALTER TABLE operators ADD COLUMN totp_secret bytea;
ALTER TABLE operators ADD COLUMN totp_pending bytea;
ALTER TABLE operators ADD COLUMN totp_enabled_at timestamptz;
ALTER TABLE operators ADD COLUMN totp_last_step bigint;
ALTER TABLE operators ADD COLUMN recovery_codes bytea[];

-- An owner may require a second factor of every member of the account.
ALTER TABLE tenants ADD COLUMN require_two_factor boolean NOT NULL DEFAULT false;

-- What a session list shows of where a session was opened.
ALTER TABLE sessions ADD COLUMN user_agent text;
ALTER TABLE sessions ADD COLUMN client text;
CREATE INDEX sessions_tenant ON sessions (tenant_id) WHERE revoked_at IS NULL;
