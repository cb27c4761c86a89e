-- Events reach the webhook fan-out through a small insert-only hand-over table instead of a flag
-- on each event (docs/decisions.md, "Webhook hand-over"): the flag's UPDATE rewrote every event
-- row (its partial index kept the update from being HOT) and left a dead copy in the largest
-- table. A statement that writes events also queues their ids here, one row per up to 500
-- events, committed with them: the fan-out sees an event exactly when its transaction commits,
-- whatever order the ids were made in, and takes each row once (DELETE … RETURNING, rows locked
-- FOR UPDATE SKIP LOCKED), in the transaction that queues the event's webhook deliveries.
CREATE TABLE webhook_handover (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_ids uuid[] NOT NULL,
    -- The earliest created_at of those events: retention keeps every event at or after the
    -- oldest row's, so no event is pruned before it was fanned out.
    oldest    timestamptz NOT NULL
);
-- A queue table: each row lives for a step or two, so it is vacuumed soon after its deletes.
ALTER TABLE webhook_handover SET (autovacuum_vacuum_scale_factor = 0.02,
                                  autovacuum_analyze_scale_factor = 0.02);

-- Fires once per statement (an accept group, a delivery step's outcomes), so writers of events
-- need no change and a statement of many events costs one hand-over row per 500 of them.
CREATE FUNCTION webhook_handover_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_handover (event_ids, oldest)
    SELECT array_agg(id), min(created_at)
    FROM (SELECT id, created_at, row_number() OVER () - 1 AS n FROM written) numbered
    GROUP BY n / 500 ORDER BY n / 500;
    RETURN NULL;
END
$$;
CREATE TRIGGER webhook_handover_queue AFTER INSERT ON events
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION webhook_handover_queue();

-- What was not fanned out yet is carried over, oldest first.
INSERT INTO webhook_handover (event_ids, oldest)
SELECT array_agg(id ORDER BY id), min(created_at)
FROM (SELECT id, created_at, row_number() OVER (ORDER BY id) - 1 AS n FROM events WHERE NOT fanned_out) pending
GROUP BY n / 500
ORDER BY n / 500;

ALTER TABLE events DROP COLUMN fanned_out;  -- its partial index events_awaiting_fan_out goes with it
