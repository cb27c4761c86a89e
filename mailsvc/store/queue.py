"""
The delivery queue as the operator sees it: the summary, the list and the actions
on queued deliveries, and the standing holds the claim consults (``deliveries._claim``).

Only queued and deferred rows are the queue (index ``deliveries_queue``). A row in flight (its
claim's lease not over) is left alone by every action: its attempt's outcome decides it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

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


#: A row of ``queue_counts`` whose rows' state is known without reading them: held, or a lease
#: and a due time outside the current minute.
_SETTLED = (
    "held OR (lease_minute IS DISTINCT FROM %(minute)s"
    " AND (due_minute IS DISTINCT FROM %(minute)s OR lease_minute > %(minute)s))"
)
_SETTLED_STATE = (
    "CASE WHEN held THEN 'held' WHEN lease_minute > %(minute)s THEN 'in_flight'"
    " WHEN due_minute < %(minute)s THEN 'due' ELSE 'deferred' END"
)
#: The rows of the others: leased until, or due (and not leased past), the current minute.
_BOUNDARY = (
    "d.held_reason IS NULL AND ((d.claimed_until >= %(minute)s AND d.claimed_until < %(next)s)"
    " OR (d.due_at >= %(minute)s AND d.due_at < %(next)s AND NOT coalesce(d.claimed_until >= %(next)s, false)))"
)
_ROW = "d.id, d.tenant_id, d.recipient, d.last_response, d.held_reason, d.claimed_until, d.due_at, d.retry_until"
#: The counts (rows folded and appended since, added up in one pass) and the current minute's
#: rows; ``deltas``: how many rows were appended since the last fold.
_SUMMARY = f"""
WITH boundary AS (
    SELECT d.* FROM (SELECT DISTINCT grp::uuid AS tenant_id FROM queue_counts
                     WHERE kind = 'tenant' AND NOT held AND due_minute = %(minute)s) t,
        LATERAL (SELECT {_ROW} FROM deliveries d WHERE d.tenant_id = t.tenant_id AND {_QUEUED}
                 AND d.due_at >= %(minute)s AND d.due_at < %(next)s) d
    UNION
    SELECT {_ROW} FROM deliveries d WHERE d.claimed_until >= %(minute)s AND d.claimed_until < %(next)s AND {_QUEUED}
)
SELECT kind, grp, {_SETTLED_STATE} AS state, last_response, sum(n) AS n, min(oldest) AS oldest,
       min(next_due) AS next_due, count(*) FILTER (WHERE NOT folded) AS deltas
FROM queue_counts WHERE {_SETTLED} GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0
UNION ALL
SELECT g.kind, g.grp, {STATE}, d.last_response, count(*), min(d.retry_until), min(d.due_at), 0
FROM boundary d CROSS JOIN LATERAL (VALUES ('destination', {DESTINATION}), ('tenant', d.tenant_id::text)) g (kind, grp)
WHERE {_BOUNDARY} GROUP BY 1, 2, 3, 4
"""
#: Rows appended since the last fold past which a summary folds them (for the next one).
FOLD_ABOVE = 20_000
#: Folds: one at a time, the others skip.
_FOLD_LOCK = 0x71636E74  # "qcnt"


async def summary(db: Database, now: datetime) -> dict:
    """
    The queue counted by destination and by tenant, by state and last response (with the oldest
    and the next due of each), from ``queue_counts`` and the rows of the current minute; the
    standing holds; the tenants' names.
    """
    minute = now.replace(second=0, microsecond=0)
    rows = await db.fetchall(_SUMMARY, {"now": now, "minute": minute, "next": minute + timedelta(minutes=1)},
                             desc="queue summary")
    if sum(r["deltas"] for r in rows) > FOLD_ABOVE:
        await fold_counts(db)
    return await _named({
        "destinations": [{"destination": r["grp"], **_counted(r)} for r in rows if r["kind"] == "destination"],
        "tenants": [{"tenant_id": uuid.UUID(r["grp"]), **_counted(r)} for r in rows if r["kind"] == "tenant"],
    }, db)


def _counted(row: dict) -> dict:
    return {k: row[k] for k in ("state", "last_response", "n", "oldest", "next_due")}


async def _named(counts: dict, db: Database) -> dict:
    """The counts with the standing holds and the names of their tenants."""
    holds = await db.fetchall(
        "SELECT id, kind, value, reason, created_at, created_by FROM queue_holds ORDER BY created_at",
        desc="queue holds",
    )
    names = {str(r["id"]): r["name"] for r in await db.fetchall(
        "SELECT id, name FROM tenants WHERE id = ANY(%s::uuid[])",
        (list({r["tenant_id"] for r in counts["tenants"]}),), desc="queue tenants",
    )}
    return {**counts, "holds": holds, "tenant_names": names}


async def recount(db: Database, now: datetime) -> dict:
    """
    The summary's counts by a pass over the whole queue (about a second a million rows): what
    ``queue_counts`` must agree with, to check them by (tests/integration/test_queue_counts.py).
    """
    rows = await db.fetchall(
        f"SELECT {DESTINATION} AS destination, d.tenant_id, {STATE} AS state, d.last_response, count(*) AS n,"
        f" min(d.retry_until) AS oldest, min(d.due_at) AS next_due FROM deliveries d WHERE {_QUEUED}"
        " GROUP BY 1, 2, 3, 4",
        {"now": now}, desc="queue recount",
    )
    counts: dict[str, list[dict]] = {"destinations": [], "tenants": []}
    for kind, key in (("destinations", "destination"), ("tenants", "tenant_id")):
        groups: dict[tuple, dict] = {}
        for r in rows:
            group = groups.setdefault((r[key], r["state"], r["last_response"]), {
                key: r[key], "state": r["state"], "last_response": r["last_response"], "n": 0,
                "oldest": r["oldest"], "next_due": r["next_due"]})
            group["n"] += r["n"]
            group["oldest"] = min(filter(None, (group["oldest"], r["oldest"])), default=None)
            group["next_due"] = min(filter(None, (group["next_due"], r["next_due"])), default=None)
        counts[kind] = list(groups.values())
    return counts


async def fold_counts(db: Database) -> int:
    """
    The deltas appended to ``queue_counts`` added into one row per group (groups that came to
    nothing gone); how many rows were folded (0: another fold is at it).
    """
    async def fold(txn: Transaction) -> int:
        locked = await txn.fetchone("SELECT pg_try_advisory_xact_lock(%s) AS locked", (_FOLD_LOCK,))
        if not locked or not locked["locked"]:
            return 0
        row = await txn.fetchone(
            "WITH gone AS (DELETE FROM queue_counts RETURNING *),"
            " kept AS (INSERT INTO queue_counts (kind, grp, last_response, held, due_minute, lease_minute, n,"
            "   oldest, next_due, folded) SELECT kind, grp, last_response, held, due_minute, lease_minute, sum(n),"
            "   min(oldest), min(next_due), true FROM gone GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0)"
            " SELECT count(*) AS folded FROM gone"
        )
        return int(row["folded"]) if row else 0

    return await db.run("fold queue counts", fold)


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
