-- The events outbox: every state change writes its event here in the same transaction; the
-- webhook dispatcher reads it. Generic on purpose: domains, email, contact events alike.

CREATE TABLE events (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type       text NOT NULL,
    data       jsonb NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX events_tenant ON events (tenant_id, id);
