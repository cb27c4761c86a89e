"""
The delivery queue as the operator sees it: the summary, the list and the actions
on queued deliveries, and the standing holds the claim consults (``deliveries._claim``).

Only queued and deferred rows are the queue (index ``deliveries_queue``). A row in flight (its
claim's lease not over) is left alone by every action: its attempt's outcome decides it.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc import timefmt
from mailsvc.domain.delivery import CONTENT_EXPIRED, RETRY_WINDOW, RETRY_WINDOW_EXHAUSTED
from mailsvc.domain.paging import Page
from mailsvc.domain.queue import QueueFilter
from mailsvc.store import deliveries
from mailsvc.store.database import Database, Transaction

#: A delivery's recipient domain, as the index ``deliveries_queue`` has it.
DESTINATION = "lower(split_part(d.recipient, '@', 2))"
_QUEUED = "d.status IN ('queued', 'deferred')"
_IDLE = "(d.claimed_until IS NULL OR d.claimed_until <= %(now)s)"
STATE = (
    "CASE WHEN d.held_reason IS NOT NULL THEN 'held' WHEN d.claimed_until > %(now)s THEN 'in_flight'"
    " WHEN d.due_at <= %(now)s THEN 'due' ELSE 'deferred' END"
)
_STATE_CONDITION = {
    "held": "d.held_reason IS NOT NULL",
    "in_flight": "d.held_reason IS NULL AND d.claimed_until > %(now)s",
    "due": f"d.held_reason IS NULL AND {_IDLE} AND d.due_at <= %(now)s",
    "deferred": f"d.held_reason IS NULL AND {_IDLE} AND d.due_at > %(now)s",
}
#: When a delivery was queued: its retry window ends 72 hours after.
QUEUED_AT = f"(d.retry_until - interval '{int(RETRY_WINDOW.total_seconds())} seconds')"
GROUPS_SHOWN = 100


def _where(found: QueueFilter, now: datetime) -> tuple[str, dict]:
    conditions, params = [_QUEUED], dict[str, object](now=now)
    if found.ids is not None:
        conditions.append("d.id = ANY(%(ids)s::uuid[])")
        params["ids"] = list(found.ids)
    if found.destination is not None:
        conditions.append(f"{DESTINATION} = %(destination)s")
        params["destination"] = found.destination
    if found.tenant_id is not None:
        conditions.append("d.tenant_id = %(tenant_id)s")
        params["tenant_id"] = found.tenant_id
    if found.state is not None:
        conditions.append(_STATE_CONDITION[found.state])
    if found.code is not None:
        conditions.append("left(d.last_response, 3) = %(code)s")
        params["code"] = str(found.code)
    if found.min_age_seconds is not None:
        conditions.append(f"{QUEUED_AT} <= %(now)s - make_interval(secs => %(min_age)s)")
        params["min_age"] = found.min_age_seconds
    return " AND ".join(conditions), params


async def summary(db: Database, now: datetime) -> dict:
    """
    The queue counted by destination, tenant, state and last response (with the oldest and the
    next due of each), in one pass; the standing holds; the tenants' names.
    """
    rows = await db.fetchall(
        f"SELECT {DESTINATION} AS destination, d.tenant_id, {STATE} AS state, d.last_response, count(*) AS n,"
        f" min(d.retry_until) AS oldest, min(d.due_at) AS next_due FROM deliveries d WHERE {_QUEUED}"
        " GROUP BY 1, 2, 3, 4",
        {"now": now}, desc="queue summary",
    )
    holds = await db.fetchall(
        "SELECT id, kind, value, reason, created_at, created_by FROM queue_holds ORDER BY created_at",
        desc="queue holds",
    )
    names = {str(r["id"]): r["name"] for r in await db.fetchall(
        "SELECT id, name FROM tenants WHERE id = ANY(%s::uuid[])",
        (list({r["tenant_id"] for r in rows}),), desc="queue tenants",
    )}
    return {"groups": rows, "holds": holds, "tenant_names": names}


async def deliveries_page(db: Database, found: QueueFilter, page: Page, now: datetime) -> tuple[list[dict], bool]:
    """The queued deliveries the filter names, newest first."""
    where, params = _where(found, now)
    if page.after is not None:
        where, order = where + " AND d.id < %(cursor)s", "ORDER BY d.id DESC"
    elif page.before is not None:
        where, order = where + " AND d.id > %(cursor)s", "ORDER BY d.id ASC"
    else:
        order = "ORDER BY d.id DESC"
    params.update(cursor=page.after or page.before, limit=page.limit + 1)
    rows = await db.fetchall(
        f"SELECT d.id, d.email_id, d.tenant_id, d.recipient, {DESTINATION} AS destination, {STATE} AS state,"
        f" d.attempts, d.last_response, d.due_at, {QUEUED_AT} AS created_at, d.retry_until, d.held_reason"
        f" FROM deliveries d WHERE {where} {order} LIMIT %(limit)s",
        params, desc="queue list",
    )
    return page.finish(rows)


async def _chosen(txn: Transaction, found: QueueFilter, now: datetime, extra: str = "TRUE") -> list[dict]:
    """The filter's deliveries that are not in flight, locked (rows a claim holds now are skipped)."""
    where, params = _where(found, now)
    return await txn.fetchall(
        f"SELECT d.id, d.email_id, d.tenant_id, d.recipient, d.held_reason, d.retry_until FROM deliveries d"
        f" WHERE {where} AND {_IDLE} AND {extra} ORDER BY d.id FOR UPDATE OF d SKIP LOCKED",
        params,
    )


async def retry(txn: Transaction, found: QueueFilter, now: datetime) -> int:
    """Due now; attempts and the retry window untouched. Held deliveries stay held."""
    rows = await _chosen(txn, found, now, "d.held_reason IS NULL")
    if rows:
        await txn.execute("UPDATE deliveries SET due_at = %s WHERE id = ANY(%s::uuid[])",
                          (now, [r["id"] for r in rows]))
    return len(rows)


async def hold(txn: Transaction, found: QueueFilter, reason: str, now: datetime, by: str) -> int:
    """Held (never claimed) with ``reason``; a filter of one destination or one tenant stands for new mail too."""
    standing = found.standing
    if standing is not None:
        await txn.execute(
            "INSERT INTO queue_holds (id, kind, value, reason, created_at, created_by) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (kind, value) DO UPDATE SET reason = excluded.reason",
            (uuid.uuid4(), *standing, reason, now, by),
        )
    rows = await _chosen(txn, found, now)
    if rows:
        await txn.execute("UPDATE deliveries SET held_reason = %s, due_at = NULL WHERE id = ANY(%s::uuid[])",
                          (reason, [r["id"] for r in rows]))
    return len(rows)


async def release(txn: Transaction, clock, found: QueueFilter) -> int:
    """
    Held deliveries due now, and the standing holds the filter names gone; a delivery whose
    retry window ended while held fails (``retry_window_exhausted``), as the worker fails it.
    """
    now = timefmt.from_seconds(clock.seconds())
    if found.ids is None and (found.destination is not None or found.tenant_id is not None):
        await txn.execute(
            "DELETE FROM queue_holds WHERE (kind = 'destination' AND value = %s) OR (kind = 'tenant' AND value = %s)",
            (found.destination, str(found.tenant_id) if found.tenant_id else None),
        )
    rows = await _chosen(txn, found, now, "d.held_reason IS NOT NULL")
    if not rows:
        return 0
    await txn.execute("UPDATE deliveries SET held_reason = NULL, due_at = %s WHERE id = ANY(%s::uuid[])",
                      (now, [r["id"] for r in rows]))
    expired = [r for r in rows if r["retry_until"] is not None and r["retry_until"] <= now]
    await deliveries.write_failures(txn, clock, [
        deliveries.Outcome(r["id"], r["tenant_id"], r["email_id"], r["recipient"], "failed",
                           {"reason": RETRY_WINDOW_EXHAUSTED}, "released after the retry window", attempted=False)
        for r in expired
    ])
    return len(rows)


async def bounce(txn: Transaction, clock, found: QueueFilter) -> int:
    """Failed (``content_expired``), with its ``email.failed``; rows kept, nobody suppressed."""
    now = timefmt.from_seconds(clock.seconds())
    rows = await _chosen(txn, found, now)
    if not rows:
        return 0
    await txn.execute("UPDATE deliveries SET held_reason = NULL WHERE id = ANY(%s::uuid[])", ([r["id"] for r in rows],))
    return await deliveries.write_failures(txn, clock, [
        deliveries.Outcome(r["id"], r["tenant_id"], r["email_id"], r["recipient"], "failed",
                           {"reason": CONTENT_EXPIRED}, "bounced by the operator", attempted=False)
        for r in rows
    ])
