-- Dashboard: the users of an account, their sign-in sessions, and the throttle of failed
-- sign-ins (docs/decisions.md, "Dashboard").

CREATE TABLE users (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email            text NOT NULL,          -- lower-cased; one user per address, service-wide
    role             text NOT NULL,
    password_hash    text,                   -- argon2id (PHC string); NULL until set
    password_version integer NOT NULL DEFAULT 0,  -- bumped by every set: old links die
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CHECK (role IN ('owner', 'member'))
);
CREATE UNIQUE INDEX users_email ON users (email);
CREATE INDEX users_tenant ON users (tenant_id, id);

-- Only a SHA-256 of the cookie's random token is kept.
CREATE TABLE sessions (
    id           uuid PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,       -- the absolute expiry
    revoked_at   timestamptz
);
CREATE INDEX sessions_user ON sessions (user_id) WHERE revoked_at IS NULL;

-- GCRA state per throttled key ('address:…', 'client:…'): failed sign-ins only. Unlogged,
-- as api_rate: a crash only forgets who was throttled.
CREATE UNLOGGED TABLE login_throttle (
    key text PRIMARY KEY,
    tat double precision NOT NULL
);

-- The timeline of one e-mail (its events carry its id).
CREATE INDEX events_email ON events ((data ->> 'email_id'), id) WHERE data ? 'email_id';
-- Recent webhook deliveries of one webhook.
CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (webhook_id, created_at DESC);
