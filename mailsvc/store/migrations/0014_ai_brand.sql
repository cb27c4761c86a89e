-- AI generation and brand import.

-- Requests of one kind an account made in the last minute ('ai', 'brand_import'): the
-- per-minute limits every node shares (a sliding window, like dns_setups).
CREATE TABLE minute_window (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind      text NOT NULL,
    at        double precision NOT NULL   -- seconds since the epoch
);
CREATE INDEX minute_window_tenant ON minute_window (tenant_id, kind, at);

-- AI generations charged per account and UTC month.
CREATE TABLE ai_usage (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    month     date NOT NULL,              -- the first day of the month
    used      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, month)
);

-- Generations under way: each holds one unit of the month's quota until it is charged (a
-- document was returned) or released (it failed); a node that died leaves its hold to expire.
CREATE TABLE ai_holds (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    month      date NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX ai_holds_tenant ON ai_holds (tenant_id, month);

-- Logos a brand import chose, served by every node at /files/brand/<id>.<ext>.
CREATE TABLE brand_files (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    sha256       bytea NOT NULL,
    content_type text NOT NULL,
    body         bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    UNIQUE (tenant_id, sha256)
);
