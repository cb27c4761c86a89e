-- Broadcasts: one draft message sent to every contact of a segment, each with its
-- own copy (docs/decisions.md "Broadcasts").
--
-- Every change of `status` is one guarded UPDATE (WHERE status = ...), so two nodes can never
-- both start, finish or cancel one broadcast. A broadcast that is sending but waits (a quota
-- used up, the account paused) keeps `status = 'sending'` and says why in `wait_reason`, until
-- `wait_until`.

CREATE TABLE broadcasts (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    segment_id   uuid REFERENCES segments (id) ON DELETE SET NULL,   -- NULL: the segment is gone
    sender       text NOT NULL,
    subject      text NOT NULL,
    reply_to     text[] NOT NULL DEFAULT '{}',
    preview_text text,
    html         text,
    text         text,
    status       text NOT NULL
        CHECK (status IN ('draft', 'scheduled', 'queued', 'sending', 'sent', 'canceled', 'failed')),
    scheduled_at timestamptz,
    started_at   timestamptz,                 -- when the membership was fixed
    sent_at      timestamptz,
    total        integer,                     -- recipients in the membership fixed at start
    wait_reason  text,                        -- daily_quota, monthly_quota, account_paused
    wait_until   timestamptz,
    failure      text,                        -- why it failed
    links_base   text,                        -- scheme://host of the unsubscribe links (no public_url)
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX broadcasts_tenant ON broadcasts (tenant_id, id DESC);
CREATE INDEX broadcasts_scheduled ON broadcasts (scheduled_at) WHERE status = 'scheduled';
CREATE INDEX broadcasts_active ON broadcasts (id) WHERE status IN ('queued', 'sending');

-- The membership fixed when the send starts: one row per contact, `pending` until the chunk
-- that holds it is written. A chunk is claimed (FOR UPDATE SKIP LOCKED) by setting `lease`
-- (a token) and `lease_until`; the accept statement that writes its e-mails turns the rows
-- `written` (with their `email_id`) only while they still hold that token, so a recipient is
-- written once whichever node took over an expired lease.
CREATE TABLE broadcast_recipients (
    broadcast_id uuid NOT NULL REFERENCES broadcasts (id) ON DELETE CASCADE,
    contact_id   uuid NOT NULL,               -- no FK: a contact deleted later keeps the record
    state        text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'written', 'skipped', 'refused')),
    email_id     uuid,
    lease        uuid,
    lease_until  timestamptz,
    PRIMARY KEY (broadcast_id, contact_id)
);
-- The chunks still to write, in contact order.
CREATE INDEX broadcast_recipients_pending ON broadcast_recipients (broadcast_id, contact_id)
    WHERE state = 'pending';
-- Stats: a broadcast's e-mails' deliveries.
CREATE INDEX broadcast_recipients_email ON broadcast_recipients (broadcast_id, email_id)
    WHERE email_id IS NOT NULL;
