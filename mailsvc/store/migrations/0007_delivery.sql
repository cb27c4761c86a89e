-- The outbound MTA: the delivery queue's lease fencing, per-recipient messages, the retry
-- window, per-tenant delivery pacing and the counters behind the reputation guard.

-- A claimed delivery has due_at pushed to the end of its lease and `claim` set: a crashed
-- node's work becomes due again when the lease ends, and an outcome is written only under
-- the claim that produced it (a late answer under an expired lease changes nothing).
ALTER TABLE deliveries
    ADD COLUMN claim           uuid,
    -- A message of this recipient's own (a broadcast-stream email with a per-recipient
    -- unsubscribe link); NULL: the email's message.
    ADD COLUMN message         bytea,
    -- Temporary failures are retried until then (72 hours after the mail was queued); set
    -- wherever a delivery becomes queued.
    ADD COLUMN retry_until     timestamptz,
    ADD COLUMN last_attempt_at timestamptz;
-- Mail queued before the MTA existed gets its window from when it was queued.
UPDATE deliveries SET retry_until = updated_at + interval '72 hours' WHERE status = 'queued';

-- Pacing (GCRA) of each tenant's deliveries at send_rate_per_sec, shared by all nodes.
CREATE UNLOGGED TABLE delivery_pace (
    tenant_id uuid PRIMARY KEY,
    tat       double precision NOT NULL
);

-- Outcomes per tenant and UTC day, for the reputation guard's 7-day rates.
CREATE TABLE delivery_stats (
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day        date NOT NULL,
    delivered  integer NOT NULL DEFAULT 0,
    bounced    integer NOT NULL DEFAULT 0,
    complained integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day)
);
