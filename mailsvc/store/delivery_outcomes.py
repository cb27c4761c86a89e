"""
Writing delivery outcomes: the deliveries' new status, their events, their e-mails' last
event and the day's reputation counters in one statement (data-modifying CTEs over the
outcomes' VALUES, each part joined to the rows the fenced update applied to), then what
only some outcomes cause: suppressions and the reputation guard.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
from psycopg2.extras import Json

from mailsvc import timefmt
from mailsvc.domain import policy
from mailsvc.domain.delivery import EVENT_OF_STATUS, GUARD_DAYS, LAST_EVENT_ORDER, Reputation
from mailsvc.domain.errors import Invalid
from mailsvc.ids import uuid7
from mailsvc.store import accounts, events
from mailsvc.store import suppressions as suppression_list
from mailsvc.store.database import Database, Transaction

_EVENT_OF_OUTCOME = {
    "delivered": "email.delivered", "deferred": "email.delivery_delayed", "bounced": "email.bounced",
    "failed": "email.failed", "complained": "email.complained",
}
_SUPPRESSION_OF_OUTCOME = {"bounced": "hard_bounce", "complained": "complaint"}
#: The ``delivery_stats`` counter an applied outcome adds one to, by status (``test_`` first
#: for mail that never left).
_COUNTED = ("delivered", "bounced", "complained")


@attrs.frozen
class Outcome:
    """
    What became of one delivery. ``claim`` fences an attempt's outcome; reports that arrive
    later (bounces, complaints) carry None. ``status`` is the row's new status; ``due_at`` is
    set for a deferral; ``event`` holds the event fields beyond the common ones.
    """

    delivery_id: uuid.UUID
    tenant_id: uuid.UUID
    email_id: uuid.UUID
    recipient: str
    status: str
    event: dict
    response: str | None = None
    claim: uuid.UUID | None = None
    due_at: float | None = None
    attempted: bool = True
    #: Counts toward the reputation guard; False for mail that never left (test addresses,
    #: capture mode), counted apart (``delivery_stats.test_*``).
    guarded: bool = True


#: Puts addresses on an account's suppression list in the transaction given (and does what that
#: causes): ``(txn, clock, tenant_id, addresses, origin, source_id)``, ``app.suppressions.add_many``.
Suppress = Callable[[Transaction, Any, uuid.UUID, list[str], str, uuid.UUID], Awaitable[object]]

_ROW = ("(%s::uuid, %s::uuid, %s::text, %s::timestamptz, %s::int, %s::text, %s::uuid, %s::uuid, %s::uuid,"
        " %s::text, %s::jsonb, %s::text, %s::text)")

#: A fenced outcome needs its claim to hold; a report applies to a delivery that already left (or
#: is leaving) and never moves a final status backwards. A deferral's event tells the attempt the
#: update counted; an e-mail's last event only moves forward (``LAST_EVENT_ORDER``).
_APPLY = (
    "WITH v (id, claim, status, due_at, inc, response, event_id, tenant_id, email_id, type, data, last_event,"
    " counted) AS (VALUES {values}),"
    " applied AS (UPDATE deliveries d SET status = v.status, due_at = v.due_at, claim = NULL, claimed_by = NULL,"
    "   claimed_until = NULL, attempts = d.attempts + v.inc, last_response = coalesce(v.response, d.last_response),"
    "   last_attempt_at = CASE WHEN v.inc > 0 THEN %(at)s ELSE d.last_attempt_at END, updated_at = %(at)s"
    "   FROM v WHERE d.id = v.id AND ("
    "     (v.claim IS NOT NULL AND d.claim = v.claim)"
    "     OR (v.claim IS NULL AND v.status = 'failed' AND d.status IN ('queued', 'deferred'))"
    "     OR (v.claim IS NULL AND v.status = 'bounced' AND d.status IN ('queued', 'deferred', 'delivered'))"
    "     OR (v.claim IS NULL AND v.status = 'complained' AND d.status IN ('delivered', 'bounced'))"
    "   ) RETURNING d.id, d.attempts),"
    " done AS (SELECT v.*, a.attempts FROM v JOIN applied a ON a.id = v.id),"
    " written_events AS (INSERT INTO events ({columns})"
    "   SELECT event_id, tenant_id, type, CASE WHEN status = 'deferred'"
    "   THEN data || jsonb_build_object('attempt', attempts) ELSE data END, %(at)s FROM done ORDER BY id),"
    " latest AS (SELECT email_id, max(array_position(%(order)s::text[], last_event)) AS rank FROM done"
    "   GROUP BY email_id),"
    " last_events AS (UPDATE emails e SET last_event = (%(order)s::text[])[l.rank] FROM latest l"
    "   WHERE e.id = l.email_id AND array_position(%(order)s::text[], e.last_event) < l.rank),"
    " counters AS (INSERT INTO delivery_stats AS s (tenant_id, day, delivered, bounced, complained,"
    "   test_delivered, test_bounced, test_complained)"
    "   SELECT tenant_id, %(day)s, {counts} FROM done WHERE counted IS NOT NULL GROUP BY tenant_id"
    "   ORDER BY tenant_id"
    "   ON CONFLICT (tenant_id, day) DO UPDATE SET delivered = s.delivered + excluded.delivered,"
    "   bounced = s.bounced + excluded.bounced, complained = s.complained + excluded.complained,"
    "   test_delivered = s.test_delivered + excluded.test_delivered,"
    "   test_bounced = s.test_bounced + excluded.test_bounced,"
    "   test_complained = s.test_complained + excluded.test_complained)"
    " SELECT id FROM applied"
).format(
    values="{values}", columns=events.COLUMNS,
    counts=", ".join(f"count(*) FILTER (WHERE counted = '{prefix}{column}')"
                     for prefix in ("", "test_") for column in _COUNTED),
)


async def write(txn: Transaction, clock, outcomes: list[Outcome], suppress: Suppress | None) -> int:
    """Write ``outcomes`` and what they cause (the module docstring) in ``txn``; how many applied
    (the others' claims no longer held, or they would move a final status backwards)."""
    if not outcomes:
        return 0
    at = timefmt.from_seconds(clock.seconds())
    # Rows are locked in id order, as every writer of outcomes does, to keep deadlocks rare.
    outcomes = sorted(outcomes, key=lambda o: o.delivery_id)
    # Escaped: the statement's own parameters come after (a response may hold a "%").
    values = ", ".join(txn.mogrify(_ROW, _row(clock, at, o)) for o in outcomes).replace("%", "%%")
    applied = {r["id"] for r in await txn.fetchall(
        _APPLY.replace("{values}", values), {"at": at, "day": at.date(), "order": list(LAST_EVENT_ORDER)},
    )}
    done = [o for o in outcomes if o.delivery_id in applied]
    if done:
        txn.notify(events.CHANNEL)
    await _suppress(txn, clock, done, suppress)
    for tenant_id in {o.tenant_id for o in done if o.guarded and o.status in ("bounced", "complained")}:
        await _guard(txn, tenant_id, at)
    return len(done)


def _row(clock, at, o: Outcome) -> tuple:
    """One outcome's VALUES row: its update, its event (written if the update applies) and what it counts."""
    data = {"email_id": str(o.email_id), "delivery_id": str(o.delivery_id), "created_at": timefmt.iso(at),
            "to": [o.recipient], "recipient": o.recipient, **o.event}
    counted = None
    if o.status in _COUNTED:
        counted = o.status if o.guarded else f"test_{o.status}"
    return (o.delivery_id, o.claim, o.status, timefmt.from_seconds(o.due_at) if o.due_at is not None else None,
            1 if o.attempted else 0, o.response, uuid7(clock.seconds()), o.tenant_id, o.email_id,
            _EVENT_OF_OUTCOME[o.status], Json(data), EVENT_OF_STATUS[o.status], counted)


async def _suppress(txn: Transaction, clock, done: list[Outcome], suppress: Suppress | None) -> None:
    """The recipients of applied hard bounces and complaints ``suppress``ed, by e-mail and origin."""
    to_suppress: dict[tuple, list[str]] = defaultdict(list)
    for o in done:
        origin = _SUPPRESSION_OF_OUTCOME.get(o.status)
        if origin is not None:
            to_suppress[(o.tenant_id, o.email_id, origin)].append(o.recipient)
    for (tenant_id, email_id, origin), addresses in to_suppress.items():
        assert suppress is not None  # only ``record`` writes bounces and complaints, with its ``suppress``
        await suppress(txn, clock, tenant_id, _valid(addresses), origin, email_id)


def _valid(addresses: list[str]) -> list[str]:
    """The addresses that can be on the list (a relay may have taken one our parser would not)."""
    valid = []
    for address in addresses:
        try:
            suppression_list.normal_form(address)
        except Invalid:
            continue
        valid.append(address)
    return valid


async def reputation(db: Database | Transaction, tenant_id: uuid.UUID, at: datetime) -> Reputation:
    """The tenant's outcomes over the guard's window: the last ``GUARD_DAYS`` UTC days, ``at``'s
    among them. The guard judges these, and the overview shows them."""
    row = await db.fetchrow(
        "SELECT coalesce(sum(delivered), 0) AS delivered, coalesce(sum(bounced), 0) AS bounced,"
        " coalesce(sum(complained), 0) AS complained FROM delivery_stats WHERE tenant_id = %s AND day > %s",
        (tenant_id, (at - timedelta(days=GUARD_DAYS)).date()),
    )
    return Reputation(int(row["delivered"]), int(row["bounced"]), int(row["complained"]))


async def _guard(txn: Transaction, tenant_id: uuid.UUID, at) -> None:
    """The reputation guard: an active tenant paused when the delivery policy says its 7-day
    rates call for it (``policy.reputation_pause``)."""
    reason = policy.reputation_pause(await reputation(txn, tenant_id, at))
    if reason is not None:
        paused = await txn.fetchone(
            "UPDATE tenants SET status = 'paused', status_reason = %s, updated_at = %s"
            " WHERE id = %s AND status = 'active' RETURNING id",
            (reason, at, tenant_id),
        )
        if paused is not None:  # every process's cached key checks see the pause at once
            accounts.notify_keys_changed(txn, tenant_id)
