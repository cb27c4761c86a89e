-- Emails, their per-recipient deliveries (the delivery queue), attachments, idempotency
-- records and sending usage counters.

CREATE TABLE emails (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    domain_id    uuid REFERENCES domains (id) ON DELETE SET NULL,
    message_id   text NOT NULL,
    sender       text NOT NULL,
    recipients   jsonb NOT NULL,        -- {"to": [...], "cc": [...], "bcc": [...], "reply_to": [...]}
    subject      text NOT NULL,
    html         text,
    text         text,
    tags         jsonb NOT NULL DEFAULT '[]',
    stream       text NOT NULL DEFAULT 'transactional',
    source       text NOT NULL,         -- api, smtp, broadcast
    scheduled_at timestamptz,
    status       text NOT NULL,         -- scheduled, queued, canceled
    last_event   text NOT NULL,
    message      bytea NOT NULL,        -- built and signed once
    created_at   timestamptz NOT NULL,
    CHECK (status IN ('scheduled', 'queued', 'canceled'))
);
CREATE INDEX emails_tenant ON emails (tenant_id, id DESC);
CREATE INDEX emails_scheduled ON emails (scheduled_at) WHERE status = 'scheduled';

CREATE TABLE deliveries (
    id            uuid PRIMARY KEY,
    email_id      uuid NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    recipient     text NOT NULL,
    status        text NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    due_at        timestamptz,          -- next attempt; NULL while scheduled or when final
    claimed_until timestamptz,
    claimed_by    text,
    last_response text,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX deliveries_email ON deliveries (email_id);
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE due_at IS NOT NULL;

CREATE TABLE attachments (
    id                  uuid PRIMARY KEY,
    email_id            uuid NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
    tenant_id           uuid NOT NULL,
    filename            text,
    content_type        text NOT NULL,
    content_disposition text NOT NULL,
    content_id          text,
    size                integer NOT NULL,
    content             bytea NOT NULL
);
CREATE INDEX attachments_email ON attachments (email_id, id);

CREATE TABLE idempotency_keys (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key          text NOT NULL,
    request_hash bytea NOT NULL,
    state        text NOT NULL,         -- pending, done
    status       integer,
    response     bytea,
    locked_until timestamptz,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

-- Accepted recipients per tenant and period ('day:2026-11-22', 'month:2026-11').
CREATE TABLE usage (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    period    text NOT NULL,
    count     integer NOT NULL,
    PRIMARY KEY (tenant_id, period)
);
