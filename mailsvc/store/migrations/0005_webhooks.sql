-- Webhooks and their deliveries. The dispatcher fans each outbox event out to the tenant's
-- enabled webhooks subscribed to its type (one delivery row per event and webhook), then
-- claims due deliveries with FOR UPDATE SKIP LOCKED and a lease (claimed_until); `claim`
-- fences the outcome so a node whose lease ran out cannot overwrite a newer attempt.

-- Set once an event has been fanned out; the partial index keeps the backlog scan cheap.
ALTER TABLE events ADD COLUMN fanned_out boolean NOT NULL DEFAULT false;
CREATE INDEX events_awaiting_fan_out ON events (id) WHERE NOT fanned_out;

CREATE TABLE webhooks (
    id                    uuid PRIMARY KEY,
    tenant_id             uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    endpoint              text NOT NULL,
    events                text[] NOT NULL,      -- main event names
    status                text NOT NULL DEFAULT 'enabled',
    naming                text NOT NULL DEFAULT 'main',  -- event names in payloads
    -- Signing secrets, AES-GCM sealed ("webhook-secrets" key, the webhook id as associated
    -- data). After a rotation the previous one keeps signing until previous_secret_until.
    secret                bytea NOT NULL,
    previous_secret       bytea,
    previous_secret_until timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CHECK (status IN ('enabled', 'disabled')),
    CHECK (naming IN ('main', 'native')),
    CHECK (cardinality(events) > 0)
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, id DESC);

CREATE TABLE webhook_deliveries (
    webhook_id      uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id        uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    tenant_id       uuid NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,   -- attempts made (the next is attempts + 1)
    due_at          timestamptz NOT NULL,
    claimed_until   timestamptz,
    claim           uuid,
    last_attempt_at timestamptz,
    last_status     integer,                      -- HTTP status of the last attempt
    last_response   text,                         -- its body (a prefix) or why it failed
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (webhook_id, event_id),
    CHECK (state IN ('pending', 'delivered', 'failed'))
);
-- Due deliveries of one webhook, oldest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, due_at) WHERE state = 'pending';
-- When the next retry falls due.
CREATE INDEX webhook_deliveries_next ON webhook_deliveries (due_at)
    WHERE state = 'pending' AND claimed_until IS NULL;
-- Attempts in flight per webhook (the per-endpoint concurrency cap).
CREATE INDEX webhook_deliveries_in_flight ON webhook_deliveries (webhook_id)
    WHERE claimed_until IS NOT NULL;
-- A queue table: every row is written three times within seconds, so it is vacuumed and its
-- statistics refreshed sooner than the defaults would (the claim's plans depend on them).
ALTER TABLE webhook_deliveries SET (autovacuum_vacuum_scale_factor = 0.02,
                                    autovacuum_analyze_scale_factor = 0.02);
-- Finished deliveries, for pruning.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (last_attempt_at)
    WHERE state <> 'pending';
