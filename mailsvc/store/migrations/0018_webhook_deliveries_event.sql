-- The webhook deliveries of an event. Pruning events (store/webhooks.py) deletes them in bulk,
-- and the cascade to webhook_deliveries looked up each event's rows: without this index, one
-- scan of the whole table per event deleted. Retention of time partitions (store/partitions.py)
-- finds a month's webhook deliveries the same way.
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
