-- The queue counts itself (docs/operations.md "The queue"): every statement that changes
-- deliveries appends what it changed in the queue (queued and deferred rows), counted by
-- destination and by tenant, to queue_counts, and the operator's summary adds these rows up
-- instead of passing over the whole queue. Rows are only appended (concurrent transactions
-- never wait on a shared counter row) and folded now and then into one row per group
-- (store/queue.py, fold_counts).
--
-- A group's state depends on the time: the minutes of its rows' due_at and claimed_until are
-- part of the group, so that only the rows of the current minute are read to tell due from
-- deferred and in flight. Held rows have neither (a held row is held at any time).
CREATE TABLE queue_counts (
    kind          text NOT NULL,         -- destination, tenant
    grp           text NOT NULL,         -- the recipient domain, or the tenant id
    last_response text,
    held          boolean NOT NULL,
    due_minute    timestamptz,           -- due_at's UTC minute
    lease_minute  timestamptz,           -- claimed_until's UTC minute
    n             integer NOT NULL,
    -- The least retry_until and due_at of the rows that entered the group: the group's oldest
    -- and next due as long as those rows stay in it, older when they have left it (until it
    -- empties and is folded).
    oldest        timestamptz,
    next_due      timestamptz,
    folded        boolean NOT NULL DEFAULT false  -- a group's row made by a fold, not a delta
);

-- One statement's changes to the queue: each changed row out of its old group (-1) and into
-- its new one (+1), both groups of each (its destination's, its tenant's), summed.
CREATE FUNCTION queue_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queue_counts (kind, grp, last_response, held, due_minute, lease_minute, n, oldest, next_due)
        SELECT g.kind, g.grp, c.last_response, c.held, c.due_minute, c.lease_minute, sum(c.sign),
               min(c.retry_until) FILTER (WHERE c.sign > 0), min(c.due_at) FILTER (WHERE c.sign > 0)
        FROM (
            SELECT r.tenant_id, r.recipient, r.last_response, r.held_reason IS NOT NULL AS held,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.due_at, timestamptz 'epoch') END AS due_minute,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.claimed_until, timestamptz 'epoch') END AS lease_minute,
                   r.retry_until, r.due_at, 1 AS sign
            FROM new_rows r WHERE r.status IN ('queued', 'deferred')
        ) c
        CROSS JOIN LATERAL (VALUES ('destination', lower(split_part(c.recipient, '@', 2))),
                                   ('tenant', c.tenant_id::text)) AS g (kind, grp)
        GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(c.sign) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO queue_counts (kind, grp, last_response, held, due_minute, lease_minute, n, oldest, next_due)
        SELECT g.kind, g.grp, c.last_response, c.held, c.due_minute, c.lease_minute, sum(c.sign),
               min(c.retry_until) FILTER (WHERE c.sign > 0), min(c.due_at) FILTER (WHERE c.sign > 0)
        FROM (
            SELECT r.tenant_id, r.recipient, r.last_response, r.held_reason IS NOT NULL AS held,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.due_at, timestamptz 'epoch') END AS due_minute,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.claimed_until, timestamptz 'epoch') END AS lease_minute,
                   r.retry_until, r.due_at, -1 AS sign
            FROM old_rows r WHERE r.status IN ('queued', 'deferred')
        ) c
        CROSS JOIN LATERAL (VALUES ('destination', lower(split_part(c.recipient, '@', 2))),
                                   ('tenant', c.tenant_id::text)) AS g (kind, grp)
        GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(c.sign) <> 0;
    ELSE
        INSERT INTO queue_counts (kind, grp, last_response, held, due_minute, lease_minute, n, oldest, next_due)
        SELECT g.kind, g.grp, c.last_response, c.held, c.due_minute, c.lease_minute, sum(c.sign),
               min(c.retry_until) FILTER (WHERE c.sign > 0), min(c.due_at) FILTER (WHERE c.sign > 0)
        FROM (
            SELECT r.tenant_id, r.recipient, r.last_response, r.held_reason IS NOT NULL AS held,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.due_at, timestamptz 'epoch') END AS due_minute,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.claimed_until, timestamptz 'epoch') END AS lease_minute,
                   r.retry_until, r.due_at, -1 AS sign
            FROM old_rows r WHERE r.status IN ('queued', 'deferred')
            UNION ALL
            SELECT r.tenant_id, r.recipient, r.last_response, r.held_reason IS NOT NULL AS held,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.due_at, timestamptz 'epoch') END AS due_minute,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.claimed_until, timestamptz 'epoch') END AS lease_minute,
                   r.retry_until, r.due_at, 1 AS sign
            FROM new_rows r WHERE r.status IN ('queued', 'deferred')
        ) c
        CROSS JOIN LATERAL (VALUES ('destination', lower(split_part(c.recipient, '@', 2))),
                                   ('tenant', c.tenant_id::text)) AS g (kind, grp)
        GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(c.sign) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_count_inserts AFTER INSERT ON deliveries REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_count_changes();
CREATE TRIGGER queue_count_updates AFTER UPDATE ON deliveries REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_count_changes();
CREATE TRIGGER queue_count_deletes AFTER DELETE ON deliveries REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queue_count_changes();

-- A truncated deliveries table leaves nothing to count.
CREATE FUNCTION queue_count_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queue_counts;
    RETURN NULL;
END
$$;
CREATE TRIGGER queue_count_truncates AFTER TRUNCATE ON deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION queue_count_truncate();

-- The rows whose lease ends in a minute, read with those due in it (claims and their outcomes
-- pass through this small index only while a lease is set).
CREATE INDEX deliveries_lease ON deliveries (claimed_until) WHERE claimed_until IS NOT NULL;

-- The queue as it is now.
INSERT INTO queue_counts (kind, grp, last_response, held, due_minute, lease_minute, n, oldest, next_due)
        SELECT g.kind, g.grp, c.last_response, c.held, c.due_minute, c.lease_minute, sum(c.sign),
               min(c.retry_until) FILTER (WHERE c.sign > 0), min(c.due_at) FILTER (WHERE c.sign > 0)
        FROM (
            SELECT r.tenant_id, r.recipient, r.last_response, r.held_reason IS NOT NULL AS held,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.due_at, timestamptz 'epoch') END AS due_minute,
                   CASE WHEN r.held_reason IS NULL THEN date_bin('1 minute', r.claimed_until, timestamptz 'epoch') END AS lease_minute,
                   r.retry_until, r.due_at, 1 AS sign
            FROM deliveries r WHERE r.status IN ('queued', 'deferred')
        ) c
        CROSS JOIN LATERAL (VALUES ('destination', lower(split_part(c.recipient, '@', 2))),
                                   ('tenant', c.tenant_id::text)) AS g (kind, grp)
        GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(c.sign) <> 0;
