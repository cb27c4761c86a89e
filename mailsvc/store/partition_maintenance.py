"""
The time partitions' months (docs/operations.md, "Time partitions", "Maintenance and
retention"): the SQL functions that bound a month of UUIDv7 ids, make a month's partitions and
drop those past the retention, installed by the partitioning step (``store/partitions.py``),
and the maintenance that the scheduler runs hourly through them.
"""

from __future__ import annotations

from datetime import datetime

from mailsvc.store.database import Database

FUNCTIONS = """
-- The smallest UUIDv7 of the millisecond of t: 48 bits of Unix milliseconds, version 7, variant
-- 10, zeros. Every id made at or after t compares greater or equal (uuid order is byte order).
CREATE OR REPLACE FUNCTION uuid7_bound(t timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') || '70008000000000000000')::uuid
$$;

-- When a UUIDv7 was made (its first 48 bits).
CREATE OR REPLACE FUNCTION uuid7_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_timestamp(('x' || lpad(left(replace(id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
$$;

-- The partition p_name of p_parent for the UTC month starting at p_month, unless it exists.
CREATE OR REPLACE FUNCTION mailsvc_create_month(p_parent text, p_name text, p_month timestamp) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass(p_name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', p_name, p_parent,
                   uuid7_bound(p_month AT TIME ZONE 'UTC'),
                   uuid7_bound((p_month + interval '1 month') AT TIME ZONE 'UTC'));
    RETURN true;
END
$$;

-- Premake and retention, as storage_settings says: the months from p_now's to premake_months
-- ahead exist, and every month that ended retention_months or more before p_now is dropped,
-- its attachments and deliveries first, then the webhook deliveries of its events, then its
-- e-mails and events (detached first: detaching checks that nothing references them).
CREATE OR REPLACE FUNCTION mailsvc_partition_maintenance(p_now timestamptz)
RETURNS TABLE (action text, partition_name text)
LANGUAGE plpgsql AS $$
DECLARE
    settings record;
    this_month timestamp := date_trunc('month', p_now AT TIME ZONE 'UTC');
    cutoff timestamp;
    month timestamp;
    parent text;
BEGIN
    SELECT * INTO settings FROM storage_settings;
    IF NOT FOUND OR NOT settings.partitioned THEN
        RETURN;
    END IF;
    -- Traffic must not queue behind maintenance: it gives up and comes back in an hour.
    PERFORM set_config('lock_timeout', '5s', true);
    FOR ahead IN 0 .. settings.premake_months LOOP
        month := this_month + make_interval(months => ahead);
        FOREACH parent IN ARRAY ARRAY['emails', 'events', 'deliveries', 'attachments'] LOOP
            IF mailsvc_create_month(parent, parent || to_char(month, '_YYYY_MM'), month) THEN
                action := 'created';
                partition_name := parent || to_char(month, '_YYYY_MM');
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
    cutoff := (p_now AT TIME ZONE 'UTC') - make_interval(months => settings.retention_months);
    FOR month IN
        SELECT DISTINCT to_date(right(c.relname, 7), 'YYYY_MM')::timestamp
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent IN ('emails'::regclass, 'events'::regclass)
          AND c.relname ~ '^(emails|events)_\\d{4}_\\d{2}$'
        ORDER BY 1
    LOOP
        EXIT WHEN month + interval '1 month' > cutoff;
        DELETE FROM webhook_deliveries
        WHERE event_id >= uuid7_bound(month AT TIME ZONE 'UTC')
          AND event_id < uuid7_bound((month + interval '1 month') AT TIME ZONE 'UTC');
        FOREACH parent IN ARRAY ARRAY['attachments', 'deliveries', 'emails', 'events'] LOOP
            partition_name := parent || to_char(month, '_YYYY_MM');
            IF parent = 'deliveries' AND to_regclass(partition_name) IS NOT NULL THEN
                -- A dropped partition fires no trigger: its queued rows leave the queue's counts first.
                DELETE FROM deliveries WHERE status IN ('queued', 'deferred')
                    AND email_id >= uuid7_bound(month AT TIME ZONE 'UTC')
                    AND email_id < uuid7_bound((month + interval '1 month') AT TIME ZONE 'UTC');
            END IF;
            IF to_regclass(partition_name) IS NOT NULL THEN
                EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, partition_name);
                EXECUTE format('DROP TABLE %I', partition_name);
                action := 'dropped';
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
"""


async def maintain(db: Database, now: datetime) -> list[dict]:
    """
    Premake and retention when the tables are partitioned (nothing otherwise): what was created
    and dropped, as ``{"action", "partition_name"}``.
    """
    present = await db.fetchrow("SELECT to_regclass('storage_settings') IS NOT NULL AS present",
                                desc="time partitions present")
    if not present["present"]:
        return []
    return await db.fetchall("SELECT action, partition_name FROM mailsvc_partition_maintenance(%s)", (now,),
                             desc="time partition maintenance")
