-- Tenants, API keys, the waitlist and the shared API rate-limit state.

CREATE TABLE tenants (
    id                uuid PRIMARY KEY,
    name              text NOT NULL,
    plan              text NOT NULL,
    sandbox           boolean NOT NULL DEFAULT true,
    status            text NOT NULL DEFAULT 'active',
    status_reason     text,
    daily_quota       integer NOT NULL,
    monthly_quota     integer NOT NULL,
    max_domains       integer,            -- NULL: unlimited
    send_rate_per_sec integer NOT NULL,
    api_rate_per_sec  integer NOT NULL,
    delivery_mode     text NOT NULL DEFAULT 'direct',
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    CHECK (status IN ('active', 'paused', 'suspended')),
    CHECK (plan IN ('free', 'starter', 'growth', 'scale')),
    CHECK (delivery_mode IN ('direct', 'relay', 'capture'))
);

-- Sending domains; the domains work adds DKIM keys, records and verification state.
CREATE TABLE domains (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    status     text NOT NULL DEFAULT 'not_started',
    created_at timestamptz NOT NULL
);
CREATE INDEX domains_tenant ON domains (tenant_id, id DESC);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL,
    prefix       text NOT NULL UNIQUE,
    secret_hmac  bytea NOT NULL,
    permission   text NOT NULL,
    domain_id    uuid REFERENCES domains (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    CHECK (permission IN ('full_access', 'sending_access'))
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id DESC);

CREATE TABLE waitlist (
    id         uuid PRIMARY KEY,
    email      text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

-- GCRA state per tenant: the theoretical arrival time, in Unix seconds. Unlogged: losing it
-- in a crash only forgets who was throttled, and it keeps WAL out of every API request.
CREATE UNLOGGED TABLE api_rate (
    tenant_id uuid PRIMARY KEY,
    tat       double precision NOT NULL
);
