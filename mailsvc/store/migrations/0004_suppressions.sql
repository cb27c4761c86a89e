-- The suppression list: addresses an account never delivers to. `email` is the address in its
-- normal form (mailsvc.domain.suppression.normal_form), so one address has one record.

CREATE TABLE suppressions (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email      text NOT NULL,
    origin     text NOT NULL,
    source_id  uuid,                    -- the email that caused it; NULL when added by hand
    created_at timestamptz NOT NULL,
    CHECK (origin IN ('hard_bounce', 'complaint', 'unsubscribe', 'manual'))
);
-- Every send looks its recipients up here, in one query.
CREATE UNIQUE INDEX suppressions_address ON suppressions (tenant_id, email);
CREATE INDEX suppressions_tenant ON suppressions (tenant_id, id DESC);
CREATE INDEX suppressions_origin ON suppressions (tenant_id, origin, id DESC);
