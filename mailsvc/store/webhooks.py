"""Rows of webhooks and of their deliveries (the dispatcher's work queue)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import attrs

from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.events import CHANNEL as EVENTS_CHANNEL
from mailsvc.store.paging import clause

_COLUMNS = (
    "id, tenant_id, endpoint, events, status, naming, secret, previous_secret,"
    " previous_secret_until, created_at, updated_at"
)


async def insert(
    txn: Transaction, webhook_id: uuid.UUID, tenant_id: uuid.UUID, endpoint: str,
    events: tuple[str, ...], naming: str, sealed_secret: bytes, now: datetime,
) -> dict:
    return await txn.fetchrow(
        "INSERT INTO webhooks (id, tenant_id, endpoint, events, naming, secret, created_at, updated_at)"
        f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (webhook_id, tenant_id, endpoint, list(events), naming, sealed_secret, now, now),
    )


async def count_locking_tenant(txn: Transaction, tenant_id: uuid.UUID) -> int:
    """The account's webhooks, counted with its row locked: concurrent creations count in turn."""
    await txn.execute("SELECT 1 FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,))
    row = await txn.fetchrow("SELECT count(*) AS n FROM webhooks WHERE tenant_id = %s", (tenant_id,))
    return row["n"]


async def get(db: Database | Transaction, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {_COLUMNS} FROM webhooks WHERE tenant_id = %s AND id = %s", (tenant_id, webhook_id)
    )


async def list_page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {_COLUMNS} FROM webhooks WHERE tenant_id = %s AND {where} {order}",
        [tenant_id, *params],
    )
    return page.finish(rows)


async def update(
    txn: Transaction, tenant_id: uuid.UUID, webhook_id: uuid.UUID, changes: dict[str, Any], now: datetime
) -> dict | None:
    assignments = "".join(f"{column} = %s, " for column in changes)
    return await txn.fetchone(
        f"UPDATE webhooks SET {assignments}updated_at = %s WHERE tenant_id = %s AND id = %s"
        f" RETURNING {_COLUMNS}",
        [*changes.values(), now, tenant_id, webhook_id],
    )


async def rotate(
    txn: Transaction, tenant_id: uuid.UUID, webhook_id: uuid.UUID, sealed_secret: bytes,
    previous_until: datetime, now: datetime,
) -> dict | None:
    """The current secret becomes the previous one (sealed values are bound to the webhook,
    not to the column, so it moves as is)."""
    return await txn.fetchone(
        "UPDATE webhooks SET previous_secret = secret, previous_secret_until = %s, secret = %s,"
        f" updated_at = %s WHERE tenant_id = %s AND id = %s RETURNING {_COLUMNS}",
        (previous_until, sealed_secret, now, tenant_id, webhook_id),
    )


async def delete(db: Database, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> bool:
    row = await db.fetchone(
        "DELETE FROM webhooks WHERE tenant_id = %s AND id = %s RETURNING id", (tenant_id, webhook_id)
    )
    return row is not None


async def drop_pending(txn: Transaction, webhook_id: uuid.UUID) -> int:
    """Forget what is still queued for a webhook (it was disabled)."""
    return await txn.execute(
        "DELETE FROM webhook_deliveries WHERE webhook_id = %s AND state = 'pending'", (webhook_id,)
    )


# The dispatcher's queue

#: NOTIFY channel raised when a fan-out queued deliveries: it wakes the dispatchers that leave
#: the fan-out to another (``Dispatcher.fans_out``).
QUEUED_CHANNEL = "webhook_deliveries"

#: Hand-over rows a fan-out step locks at most (each locked row is a write; a row holds 1 to 500
#: events).
HANDOVER_ROWS = 100

#: Take hand-over rows (migration 0027, filled by a trigger on ``events``), oldest first, until
#: about ``fan_out`` events, and turn their events into one delivery per subscribed, enabled
#: webhook of their tenant that existed when the event happened. A row is seen once its events'
#: transaction committed and is taken by one transaction only (SKIP LOCKED lets nodes take
#: different rows); deleting it commits with the deliveries it queued.
_FAN_OUT = f"""
    WITH locked AS (
        SELECT id, cardinality(event_ids) AS n FROM webhook_handover ORDER BY id LIMIT {HANDOVER_ROWS}
        FOR UPDATE SKIP LOCKED
    ), picked AS (
        SELECT id FROM (SELECT id, sum(n) OVER (ORDER BY id) - n AS before FROM locked) counted
        WHERE before < %(fan_out)s
    ), taken AS (
        DELETE FROM webhook_handover h USING picked WHERE h.id = picked.id RETURNING h.event_ids
    ), batch AS (
        SELECT e.id, e.tenant_id, e.type, e.created_at
        FROM taken CROSS JOIN LATERAL unnest(taken.event_ids) AS t (event_id)
        JOIN events e ON e.id = t.event_id
    ), queued AS (
        INSERT INTO webhook_deliveries (webhook_id, event_id, tenant_id, due_at, created_at)
        SELECT w.id, batch.id, batch.tenant_id, %(now)s, %(now)s
        FROM batch JOIN webhooks w ON w.tenant_id = batch.tenant_id
        WHERE w.status = 'enabled' AND batch.type = ANY (w.events)
          AND w.created_at <= batch.created_at
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM batch) AS taken,
           (SELECT count(*) FROM (SELECT pg_notify(%(queued_channel)s, '') FROM (SELECT 1 FROM queued LIMIT 1) q) n)
           AS notified
"""

#: Whether events wait to be fanned out.
_BACKLOG = "EXISTS (SELECT 1 FROM webhook_handover)"

#: Lease due deliveries of enabled webhooks, at most ``cap`` in flight per webhook counting
#: every node's, each row with what its request needs.
_CLAIM = """
    busy AS (
        SELECT webhook_id, count(*) AS n FROM webhook_deliveries
        WHERE claimed_until IS NOT NULL AND claimed_until > %(now)s GROUP BY webhook_id
    ), ready AS (
        SELECT w.id, %(cap)s - coalesce(busy.n, 0) AS room
        FROM webhooks w LEFT JOIN busy ON busy.webhook_id = w.id
        WHERE w.status = 'enabled' AND coalesce(busy.n, 0) < %(cap)s
    ), picked AS (
        SELECT d.webhook_id, d.event_id FROM ready CROSS JOIN LATERAL (
            SELECT webhook_id, event_id FROM webhook_deliveries
            WHERE webhook_id = ready.id AND state = 'pending' AND due_at <= %(now)s
              AND (claimed_until IS NULL OR claimed_until <= %(now)s)
            ORDER BY due_at LIMIT ready.room
            FOR UPDATE SKIP LOCKED
        ) d
        ORDER BY random() LIMIT %(limit)s
    ), claimed AS (
        UPDATE webhook_deliveries d SET claimed_until = %(lease)s, claim = %(claim)s
        FROM picked
        JOIN webhooks w ON w.id = picked.webhook_id
        JOIN events e ON e.id = picked.event_id
        WHERE d.webhook_id = picked.webhook_id AND d.event_id = picked.event_id
        RETURNING d.webhook_id, d.event_id, d.attempts, w.endpoint, w.naming, w.secret,
                  w.previous_secret, w.previous_secret_until, e.type, e.created_at, e.data
    )
"""

#: Write finished attempts, fenced by the claim they were made under; ``counted`` is 0 for
#: a claim given back unattempted. Each counted attempt that held its claim is also kept in
#: ``webhook_attempts`` by the same statement (migration 0028): time, status, duration, the
#: answer's first 2 KB, and what went wrong (``domain.webhooks.attempt_error``). The outcomes
#: come as ONE parameter, a JSON array of an array per outcome (``outcomes_json``): composing
#: it took psycopg2 about a third of the time arrays of each field took (their ``uuid.UUID``
#: go through its Python adapter one by one) and PostgreSQL less than half
#: (``python -m bench.webhook_outcomes``; docs/benchmarks.md, "Webhook latency").
_RECORD = """
    WITH v AS (
        SELECT (o->>0)::uuid AS webhook_id, (o->>1)::uuid AS event_id, (o->>2)::uuid AS claim, o->>3 AS state,
               (o->>4)::int AS counted, (o->>5)::timestamptz AS due_at, (o->>6)::timestamptz AS at,
               (o->>7)::int AS status, o->>8 AS response, (o->>9)::int AS duration, o->>10 AS error,
               o->>11 AS detail
        FROM jsonb_array_elements(%(outcomes)s::jsonb) AS o
    ), recorded AS (
        UPDATE webhook_deliveries d SET state = v.state, attempts = d.attempts + v.counted,
            due_at = v.due_at, claimed_until = NULL, claim = NULL,
            last_attempt_at = coalesce(v.at, d.last_attempt_at),
            last_status = CASE WHEN v.counted = 1 THEN v.status ELSE d.last_status END,
            last_response = CASE WHEN v.counted = 1 THEN v.response ELSE d.last_response END
        FROM v
        WHERE d.webhook_id = v.webhook_id AND d.event_id = v.event_id AND d.claim = v.claim
        RETURNING d.webhook_id, d.event_id, d.tenant_id, d.attempts, v.counted, v.at, v.status, v.duration,
                  v.error, v.detail, v.response
    )
    INSERT INTO webhook_attempts (webhook_id, event_id, attempt, tenant_id, at, status, duration_ms, error, detail,
                                  response)
    SELECT webhook_id, event_id, attempts, tenant_id, at, status, duration, error, coalesce(detail, ''),
           CASE WHEN status IS NULL THEN '' ELSE coalesce(response, '') END
    FROM recorded WHERE counted = 1
    ON CONFLICT DO NOTHING
"""


@attrs.frozen
class Outcome:
    """What became of one claimed delivery: ``counted`` 0 for a claim given back unattempted;
    ``response`` the answer's first 2 KB, or why there was none (the delivery's last answer)."""

    webhook_id: uuid.UUID
    event_id: uuid.UUID
    claim: uuid.UUID
    state: str
    counted: int
    due_at: datetime
    at: datetime | None = None
    status: int | None = None
    response: str | None = None
    duration_ms: int = 0
    error: str | None = None
    detail: str = ""


def outcomes_json(outcomes: list[Outcome]) -> str:
    """Outcomes as the JSON text ``_RECORD`` reads: one array of fields per outcome, in order,
    ids and times as their text."""
    return json.dumps([
        [str(o.webhook_id), str(o.event_id), str(o.claim), o.state, o.counted, o.due_at.isoformat(),
         None if o.at is None else o.at.isoformat(), o.status, o.response, o.duration_ms, o.error, o.detail]
        for o in outcomes
    ], ensure_ascii=False)


async def fan_out(txn: Transaction, now: datetime, limit: int) -> int:
    """Fan out up to ``limit`` events; returns how many were taken."""
    row = await txn.fetchrow(_FAN_OUT, {"fan_out": limit, "now": now, "queued_channel": QUEUED_CHANNEL})
    return row["taken"]


async def claim(
    txn: Transaction, now: datetime, lease_until: datetime, claim_id: uuid.UUID, per_webhook: int, limit: int
) -> list[dict]:
    return await txn.fetchall(
        f"WITH {_CLAIM} SELECT * FROM claimed",
        {"now": now, "lease": lease_until, "claim": claim_id, "cap": per_webhook, "limit": limit},
    )


async def record_outcomes(db: Database, outcomes: list[Outcome]) -> None:
    await db.execute(_RECORD, {"outcomes": outcomes_json(outcomes)}, desc="record webhook attempts")


@attrs.frozen
class Dispatched:
    claimed: list[dict]
    next_due: datetime | None  # the earliest retry not due yet
    backlog: bool  # events still wait to be fanned out


async def dispatch(
    db: Database, outcomes: list[Outcome], now: datetime, lease_until: datetime, claim_id: uuid.UUID,
    per_webhook: int, limit: int, fan_out_batch: int,
) -> Dispatched:
    """
    One dispatcher step in one round trip and one transaction: write ``outcomes`` (freeing
    their webhooks' capacity), fan out a batch of about ``fan_out_batch`` events (none: the
    fan-out is another dispatcher's), lease what is due, and report when the next retry falls
    due. The statements run in order, each seeing the ones before.
    """
    rows = await db.fetchall(
        ";".join([
            _RECORD if outcomes else "SELECT 1",
            _FAN_OUT if fan_out_batch else "SELECT 1",
            f"""WITH {_CLAIM}, upcoming AS (
                    SELECT (SELECT min(due_at) FROM webhook_deliveries
                            WHERE state = 'pending' AND claimed_until IS NULL AND due_at > %(now)s) AS next_due,
                           {_BACKLOG if fan_out_batch else "false"} AS backlog
                )
                SELECT upcoming.*, claimed.* FROM upcoming LEFT JOIN claimed ON true""",
        ]),
        {
            "outcomes": outcomes_json(outcomes), "now": now, "lease": lease_until, "claim": claim_id,
            "cap": per_webhook, "limit": limit, "fan_out": fan_out_batch, "queued_channel": QUEUED_CHANNEL,
        },
        desc="webhook dispatch",
    )
    claimed = [row for row in rows if row["webhook_id"] is not None]
    return Dispatched(claimed, rows[0]["next_due"], rows[0]["backlog"])


async def prune(db: Database, deliveries_before: datetime, events_before: datetime) -> None:
    """Forget finished deliveries, and events old enough that nothing can still be pending (and
    none still to be fanned out: every event of a hand-over row is at or after its ``oldest``)."""
    await db.execute(
        "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND last_attempt_at < %s",
        (deliveries_before,), desc="prune webhook deliveries",
    )
    await db.execute(
        "DELETE FROM events WHERE created_at < least(%s, (SELECT min(oldest) FROM webhook_handover))",
        (events_before,),
        desc="prune events",
    )
    # The operator's audit log is kept as long as the events.
    await db.execute("DELETE FROM audit_log WHERE at < %s", (events_before,), desc="prune audit log")


async def retry_now(txn: Transaction, tenant_id: uuid.UUID, webhook_id: uuid.UUID, event_id: uuid.UUID,
                    now: datetime) -> tuple[dict | None, dict | None]:
    """
    Make one delivery of the account's webhook due at ``now`` if it is pending or failed and
    no attempt of it is in flight; the webhook's row is read FOR SHARE, so a disabling waits for
    this transaction and then drops the delivery it made pending. Returns the webhook (its
    ``status``) and the delivery as it was before (``retried``: whether this made it due, which
    wakes the dispatchers), either None when there is no such row (a disabled webhook: no
    delivery is looked at).
    """
    hook = await txn.fetchone(
        "SELECT id, status FROM webhooks WHERE tenant_id = %s AND id = %s FOR SHARE", (tenant_id, webhook_id)
    )
    if hook is None or hook["status"] != "enabled":
        return hook, None
    delivery = await txn.fetchone(
        "WITH retried AS ("
        "  UPDATE webhook_deliveries SET state = 'pending', due_at = %(now)s"
        "  WHERE webhook_id = %(webhook)s AND event_id = %(event)s AND state IN ('pending', 'failed')"
        "    AND (claimed_until IS NULL OR claimed_until <= %(now)s)"
        "  RETURNING state, attempts"
        "), woken AS ("
        # The dispatcher that fans out listens on "events", the others on QUEUED_CHANNEL.
        "  SELECT pg_notify(channel, '') FROM (SELECT 1 FROM retried) r,"
        "         unnest(ARRAY[%(events)s, %(queued)s]) AS channel"
        ")"
        " SELECT d.state, d.attempts, d.claimed_until, (SELECT count(*) FROM retried) = 1 AS retried,"
        "        (SELECT count(*) FROM woken) AS woken"
        " FROM webhook_deliveries d WHERE d.webhook_id = %(webhook)s AND d.event_id = %(event)s",
        {"now": now, "webhook": webhook_id, "event": event_id, "events": EVENTS_CHANNEL, "queued": QUEUED_CHANNEL},
    )
    return hook, delivery
