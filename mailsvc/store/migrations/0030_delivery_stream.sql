-- A delivery knows its stream: an account's broadcast (its e-mail's stream `broadcast`, a
-- broadcast's fan-out among them) is bulk, anything else transactional, the default, so that
-- the claim takes an account's due transactional mail before its broadcast backlog
-- (docs/decisions.md, "A fair claim"). A retry, a scheduled e-mail's release or a hold changes
-- the row, never its stream. On the plain table and on a partitioned one (store/partitions.py)
-- alike: the column is added to every partition without a rewrite (a constant default), the
-- index is made on every partition.
ALTER TABLE deliveries ADD COLUMN bulk boolean NOT NULL DEFAULT false;

-- The claim's index: each account's due mail stream by stream, transactional first, oldest due
-- first within a stream. The claim still finds the accounts with queued mail by skipping from
-- one tenant to the next in it, and reads each stream's due rows from its start.
CREATE INDEX deliveries_tenant_stream_due ON deliveries (tenant_id, bulk, due_at) WHERE status IN ('queued', 'deferred');
DROP INDEX deliveries_tenant_due;
