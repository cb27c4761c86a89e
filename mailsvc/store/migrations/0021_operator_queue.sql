-- The delivery queue in the operator's hands (docs/operations.md "The queue"), named
-- operator tokens and the audit log.

-- A held delivery is never claimed: holding sets held_reason and clears due_at (it leaves the
-- claim's index); a release makes it due again. A hold writes no event.
ALTER TABLE deliveries ADD COLUMN held_reason text;

-- The queue (queued and deferred deliveries) by recipient domain: the summary, the operator's
-- filters and actions read only these rows, however many final ones the table holds.
CREATE INDEX deliveries_queue ON deliveries (lower(split_part(recipient, '@', 2)), tenant_id)
    WHERE status IN ('queued', 'deferred');

-- Standing holds: a destination's or a tenant's new mail is held too when the claim meets it,
-- until the operator releases it.
CREATE TABLE queue_holds (
    id         uuid PRIMARY KEY,
    kind       text NOT NULL,           -- destination, tenant
    value      text NOT NULL,           -- a recipient domain, or a tenant id
    reason     text NOT NULL,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL,           -- the operator token's name
    CHECK (kind IN ('destination', 'tenant')),
    UNIQUE (kind, value)
);

-- Named operator tokens besides the configured one; only an HMAC of each is stored.
CREATE TABLE operator_tokens (
    id           uuid PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    token_hmac   bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz
);

-- Who did what to the queue, the operator tokens and users' set-password links; pruned with
-- the events.
CREATE TABLE audit_log (
    id     uuid PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text NOT NULL,
    action text NOT NULL,
    filter jsonb,
    count  integer,
    detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON audit_log (at);
