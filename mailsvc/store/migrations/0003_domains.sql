-- Sending domains: their settings, DKIM keys, per-record verification state and the
-- scheduler's claim (FOR UPDATE SKIP LOCKED with a lease), plus the log behind the limit of
-- DNS provider set-ups per tenant.

ALTER TABLE domains
    ADD COLUMN return_path     text NOT NULL DEFAULT 'bounces',
    ADD COLUMN tls             text NOT NULL DEFAULT 'opportunistic',
    ADD COLUMN region          text NOT NULL DEFAULT 'local',
    ADD COLUMN record_status   jsonb NOT NULL DEFAULT '{}',   -- record key -> status
    ADD COLUMN updated_at      timestamptz,
    ADD COLUMN window_started  timestamptz,   -- start of the current verification window
    ADD COLUMN checks          integer NOT NULL DEFAULT 0,   -- checks in this window (backoff)
    ADD COLUMN last_checked_at timestamptz,
    ADD COLUMN suspect_since   timestamptz,   -- a verified domain whose last check failed once
    ADD COLUMN next_check_at   timestamptz,   -- NULL: no check planned (not_started, failed)
    ADD COLUMN claimed_until   timestamptz,
    ADD COLUMN claim           uuid,          -- the claim a check's result must still hold
    ADD CONSTRAINT domains_status CHECK (status IN ('not_started', 'pending', 'verified', 'failed')),
    ADD CONSTRAINT domains_tls CHECK (tls IN ('opportunistic', 'enforced'));

UPDATE domains SET updated_at = created_at;
-- Rows written before (or by hand in tests) get the time of the write.
ALTER TABLE domains ALTER COLUMN updated_at SET NOT NULL, ALTER COLUMN updated_at SET DEFAULT now();

-- One account per name: a second account adding it is refused (403, docs/contract/main-api.md "Errors").
CREATE UNIQUE INDEX domains_name ON domains (name);
CREATE INDEX domains_due ON domains (next_check_at) WHERE next_check_at IS NOT NULL;

-- Private keys are AES-GCM sealed under a key derived from the master key ("dkim-keys"),
-- with the key's id as associated data; deleting the domain deletes them.
CREATE TABLE dkim_keys (
    id          uuid PRIMARY KEY,
    domain_id   uuid NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    selector    text NOT NULL,
    algorithm   text NOT NULL,
    public_key  text NOT NULL,   -- base64, the p= of the published record
    private_key bytea NOT NULL,  -- nonce || ciphertext
    created_at  timestamptz NOT NULL,
    UNIQUE (domain_id, selector),
    CHECK (algorithm IN ('rsa-sha256', 'ed25519-sha256'))
);

-- Recent DNS provider set-ups per tenant (Unix seconds): at most 10 a minute.
CREATE TABLE dns_setups (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    at        double precision NOT NULL
);
CREATE INDEX dns_setups_tenant ON dns_setups (tenant_id, at);
