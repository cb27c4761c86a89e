-- The operators' accounts for the web console and their sessions (docs/decisions.md,
-- "Operator console"). Apart from the dashboard's users and sessions: a tenant's session can
-- never stand for an operator, nor an operator's for a tenant.

CREATE TABLE operators (
    id               uuid PRIMARY KEY,
    email            text NOT NULL UNIQUE,   -- lower-cased
    name             text NOT NULL,
    password_hash    text,                   -- argon2id (PHC string); NULL until set
    password_version integer NOT NULL DEFAULT 0,  -- bumped by every set: old links die
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

-- Only a SHA-256 of the cookie's random token is kept.
CREATE TABLE operator_sessions (
    id           uuid PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,
    operator_id  uuid NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,       -- the absolute expiry
    revoked_at   timestamptz
);
CREATE INDEX operator_sessions_operator ON operator_sessions (operator_id) WHERE revoked_at IS NULL;
