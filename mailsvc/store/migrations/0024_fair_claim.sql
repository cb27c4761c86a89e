-- The delivery claim shares each step between the accounts with due mail and never reads a
-- paused, suspended or held account's queue (docs/decisions.md, "A fair claim"): it finds the
-- accounts with queued mail by skipping from one tenant to the next in this index, and takes
-- each active account's oldest due rows from it. The sweep that fails a suspended account's
-- whole queue in chunks reads it too.
CREATE INDEX deliveries_tenant_due ON deliveries (tenant_id, due_at)
    WHERE status IN ('queued', 'deferred') AND due_at IS NOT NULL;
