-- Every attempt of a webhook delivery (docs/decisions.md, "Webhook attempts"): when, the HTTP
-- status, how long it took, the first 2 KB of the answer and what went wrong, as a kind the
-- dashboard tells in words and the dispatcher's own message. A row is written by the statement
-- that records the attempt's outcome on its delivery (store/webhooks.py, ``_RECORD``), fenced by
-- the same claim: no extra round trip, and an outcome that lost its lease leaves no row either.
-- Rows go with their delivery (the cascade): pruning finished deliveries after a week, and
-- events after 30 days, prunes their attempts; a delivery has at most its scheduled attempts
-- plus the "retry now"s its account may ask for (capped per account), so rows stay bounded.
CREATE TABLE webhook_attempts (
    webhook_id  uuid NOT NULL,
    event_id    uuid NOT NULL,
    attempt     integer NOT NULL,  -- 1-based, as the delivery's ``attempts`` counted it
    tenant_id   uuid NOT NULL,
    at          timestamptz NOT NULL,
    status      integer,           -- NULL: no HTTP answer
    duration_ms integer NOT NULL,
    error       text,              -- NULL: a success (2xx)
    detail      text NOT NULL DEFAULT '',  -- the dispatcher's words for a failure without an answer
    response    text NOT NULL DEFAULT '',  -- the answer's first 2 KB
    PRIMARY KEY (webhook_id, event_id, attempt),
    FOREIGN KEY (webhook_id, event_id) REFERENCES webhook_deliveries (webhook_id, event_id) ON DELETE CASCADE,
    CHECK (error IN ('timeout', 'refused', 'connect', 'tls', 'dns', 'connection', 'too_large', 'redirect',
                     'blocked', 'http_4xx', 'http_5xx', 'http_other', 'internal'))
);
-- An endpoint's attempts of the last 24 hours (its success rate on the dashboard).
CREATE INDEX webhook_attempts_recent ON webhook_attempts (webhook_id, at);
