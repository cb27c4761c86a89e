-- The development inbox: each message delivered to a test address or by an account
-- in capture mode, as signed at the door, the last 1,000 per account (trimmed on insert).
-- Not partitioned and referencing no partitioned table: its email_id is a plain column, so
-- the time-partition step neither moves it nor depends on it, and a month of e-mails dropped
-- leaves its inbox entries (the signed bytes are their own).
CREATE TABLE inbox (
    id          uuid PRIMARY KEY,             -- UUIDv7: newest first by id
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email_id    uuid NOT NULL,
    recipients  text[] NOT NULL,
    outcome     text NOT NULL,                -- delivered, bounced, complained (test), captured
    sender      text NOT NULL,
    subject     text NOT NULL,
    domain      text NOT NULL,                -- the signing domain (d=)
    return_path text NOT NULL,                -- the envelope sender it would have left with
    simulated   boolean NOT NULL,             -- signed with the node's test key (test sender)
    message     bytea NOT NULL,               -- as signed, all headers
    created_at  timestamptz NOT NULL
);
CREATE INDEX inbox_tenant ON inbox (tenant_id, id DESC);

-- Outcomes of mail that never left (test addresses, capture mode), per tenant and day: shown
-- with the others by the dashboard, left out of the reputation guard's figures.
ALTER TABLE delivery_stats
    ADD COLUMN test_delivered  integer NOT NULL DEFAULT 0,
    ADD COLUMN test_bounced    integer NOT NULL DEFAULT 0,
    ADD COLUMN test_complained integer NOT NULL DEFAULT 0;
