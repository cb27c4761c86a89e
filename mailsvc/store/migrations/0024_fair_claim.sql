-- The delivery claim shares each step between the accounts with due mail and never reads a
-- paused, suspended or held account's queue (docs/decisions.md, "A fair claim"): it finds the
-- accounts with queued mail by skipping from one tenant to the next in this index, and takes
-- each active account's oldest due rows from it; the sweep that fails a suspended account's
-- queue in chunks reads that account's rows from it.
CREATE INDEX deliveries_tenant_due ON deliveries (tenant_id, due_at) WHERE status IN ('queued', 'deferred');

-- Every account's due mail in one order was the index of the claim that took the oldest due
-- mail of all accounts. Left in place, the planner still took it for one account's oldest due
-- rows (due_at follows the rows' order on disk, so its heap reads look cheap) and walked it past
-- every other account's due mail: past a paused account's whole backlog at every claim. The
-- queue's depth and age (metrics) read the index above instead.
DROP INDEX deliveries_due;
