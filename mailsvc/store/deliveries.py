"""
The delivery queue in PostgreSQL: claiming due deliveries under a lease (the statement that
writes the claim reads what its rows send: ``delivery_contents``), renewing the lease before
DATA, and writing their outcomes with the events, suppressions and reputation counters they
cause, in one transaction (``delivery_outcomes``).

A claim pushes ``due_at`` to the end of the lease and sets ``claim``: a node that dies leaves
its rows to come due again when the lease ends, and an outcome is written only under the
claim that produced it. Claiming is fair and where tenants are paced (``send_rate_per_sec``, a
GCRA row per tenant shared by all nodes): it shares its room between the active accounts with
due mail and never reads a paused, suspended or held account's; the queue's sweep fails a
suspended account's queue in bulk and holds a held account's new mail (docs/decisions.md, "A
fair claim"). What is admitted, at what pace, held or paused by the reputation guard, the
delivery policy decides (``domain/policy.py``); this module carries it out.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime

import attrs

from mailsvc import timefmt
from mailsvc.domain import policy
from mailsvc.domain.delivery import AccountPace, fair_shares
from mailsvc.store import delivery_contents, delivery_outcomes
from mailsvc.store.database import Database, Transaction
from mailsvc.store.delivery_contents import Contents
from mailsvc.store.delivery_outcomes import Outcome, Suppress
from mailsvc.store.delivery_sweep import fail_suspended, hold_held_accounts
from mailsvc.store.groupcommit import GroupCommit

#: The most renewals one statement writes (a step's transactions, and then some).
RENEWALS_PER_STATEMENT = 200


@attrs.frozen
class ClaimedAccount:
    """The account of claimed deliveries, as the delivery policy reads it (``policy.Account``)."""

    id: uuid.UUID
    status: str
    status_reason: str | None
    send_rate_per_sec: float
    delivery_mode: str


@attrs.frozen
class ClaimedDelivery:
    """One claimed delivery."""

    id: uuid.UUID
    email_id: uuid.UUID
    recipient: str
    attempts: int
    retry_until: float
    own_message: bool
    account: ClaimedAccount
    #: The broadcast stream's (``deliveries.bulk``): transactional mail goes ahead of it.
    bulk: bool = False

    @property
    def tenant_id(self) -> uuid.UUID:
        return self.account.id

    @property
    def queue_destination(self) -> str:
        """The destination a standing hold names (``store.queue.DESTINATION``: the text between
        the recipient's first and second ``@``, lowercased)."""
        return (self.recipient.split("@") + [""])[1].lower()


@attrs.frozen
class Claimed:
    work: list[ClaimedDelivery]
    #: When postponed (paced) work comes due next, if any.
    next_due: float | None
    #: What ``work`` sends, read by the statement that claimed it.
    contents: Contents


async def claim(db: Database, clock, node: str, token: uuid.UUID, limit: int, lease: float) -> Claimed:
    return await db.run("claim_deliveries", _claim, clock, node, token, limit, lease)


def _due(tenant: str, bulk: bool) -> str:
    """An account's due rows of one stream (``bulk``: the broadcast stream): one range of the
    claim's index ``deliveries_tenant_stream_due`` (migration 0030), in its order."""
    return (f"d.tenant_id = {tenant} AND d.bulk = {str(bulk).lower()} AND d.status IN ('queued', 'deferred')"
            " AND d.due_at <= %(at)s")


def _due_first(tenant: str, columns: str, limit: str, locked: str = "") -> str:
    """An account's due rows, its transactional stream's first (``_due``), up to ``limit``: the
    broadcast stream's range is read only for the room the first leaves. ``columns`` of ``d``,
    each stream's rows ``locked`` as the claim locks them, or not."""
    streams = [f"SELECT * FROM (SELECT {columns} FROM deliveries d WHERE {_due(tenant, bulk)}"
               f" ORDER BY d.due_at LIMIT {limit}{locked}) s{int(bulk)}" for bulk in (False, True)]
    return f"{streams[0]} UNION ALL {streams[1]} LIMIT {limit}"


#: The accounts with queued mail, one index probe each however long their queues are (a loose
#: scan of ``deliveries_tenant_stream_due``: from one tenant to the next), keeping the claimable
#: ones (``claimable``: ``policy.CLAIMABLE_STATUSES``) no standing hold stops, with their oldest
#: due mail of either stream and how many are due (up to the claim's room, read as the share is
#: taken: ``_due_first``).
DUE_ACCOUNTS = (
    "WITH RECURSIVE queued (tenant_id) AS ("
    "   (SELECT tenant_id FROM deliveries WHERE status IN ('queued', 'deferred') ORDER BY tenant_id LIMIT 1)"
    "   UNION ALL"
    "   SELECT (SELECT d.tenant_id FROM deliveries d WHERE d.status IN ('queued', 'deferred')"
    "           AND d.tenant_id > q.tenant_id ORDER BY d.tenant_id LIMIT 1)"
    "   FROM queued q WHERE q.tenant_id IS NOT NULL"
    " )"
    " SELECT q.tenant_id, due.oldest, due.n, t.status, t.status_reason, t.send_rate_per_sec, t.delivery_mode,"
    " p.tat FROM queued q"
    " JOIN tenants t ON t.id = q.tenant_id AND t.status = ANY(%(claimable)s::text[])"
    " LEFT JOIN delivery_pace p ON p.tenant_id = q.tenant_id"
    # The oldest of the rows counted, or the broadcast stream's oldest if the count stopped before it.
    f" CROSS JOIN LATERAL (SELECT least(min(o.due_at), (SELECT min(d.due_at) FROM deliveries d"
    f"   WHERE {_due('q.tenant_id', True)})) AS oldest, count(*) AS n"
    f"   FROM ({_due_first('q.tenant_id', 'd.due_at', '%(limit)s')}) o) due"
    " WHERE due.n > 0"
    " AND NOT EXISTS (SELECT 1 FROM queue_holds h WHERE h.kind = 'tenant' AND h.value = q.tenant_id::text)"
    " ORDER BY due.oldest LIMIT %(limit)s"
)

#: Each account's share of the claim, its transactional stream's oldest due rows first, then its
#: broadcast stream's (``_due_first``); rows another claim holds are skipped.
TAKE_SHARES = (
    "SELECT d.id, d.email_id, d.tenant_id, d.recipient, d.attempts,"
    " extract(epoch FROM d.retry_until) AS retry_until,"
    " d.message IS NOT NULL AS own_message, d.bulk, t.status, t.status_reason, t.send_rate_per_sec, t.delivery_mode"
    " FROM unnest(%(tenants)s::uuid[], %(shares)s::int[]) AS s(tenant_id, share)"
    " JOIN tenants t ON t.id = s.tenant_id AND t.status = ANY(%(claimable)s::text[])"
    f" CROSS JOIN LATERAL ({_due_first('s.tenant_id', 'd.*', 's.share', ' FOR UPDATE SKIP LOCKED')}) d"
)


async def _claim(txn: Transaction, clock, node: str, token: uuid.UUID, limit: int, lease: float) -> Claimed:
    """
    A fair claim (docs/decisions.md, "A fair claim"): the room is shared between the accounts
    with due mail the delivery policy admits (``policy.CLAIMABLE_STATUSES``), so that no
    account's backlog delays another's mail by more than a step; a paused, suspended or held
    account's mail is never read (a suspended account's queue fails in bulk:
    ``fail_suspended``). An account takes no more than its pace lets start now, and one more:
    that one, postponed, tells when its next turn is.
    """
    now = clock.seconds()
    at = timefmt.from_seconds(now)
    claimable = list(policy.CLAIMABLE_STATUSES)
    due = await txn.fetchall(DUE_ACCOUNTS, {"at": at, "limit": limit, "claimable": claimable})
    wanted = []
    for r in due:
        rate = policy.resolve(_account(r)).pace_per_sec
        may_start, _, _ = AccountPace(rate, now if r["tat"] is None else r["tat"]).admit(now, r["n"])
        wanted.append(min(r["n"], may_start + 1))
    shares = fair_shares(wanted, limit)
    taking = [(r["tenant_id"], share) for r, share in zip(due, shares, strict=True) if share > 0]
    rows = await txn.fetchall(TAKE_SHARES, {
        "tenants": [t for t, _ in taking], "shares": [s for _, s in taking], "at": at, "claimable": claimable,
    }) if taking else []
    taken = [_claimed(r) for r in rows]
    taken = await _hold_standing(txn, taken)
    by_tenant: dict[uuid.UUID, list[ClaimedDelivery]] = defaultdict(list)
    for delivery in taken:
        by_tenant[delivery.tenant_id].append(delivery)
    admitted: list[ClaimedDelivery] = []
    postponed: dict[float, list[uuid.UUID]] = defaultdict(list)
    paces = await _paces(txn, list(by_tenant))
    for tenant_id, tenant_rows in by_tenant.items():
        pace = AccountPace(policy.resolve(tenant_rows[0].account).pace_per_sec, paces.get(tenant_id, now))
        count, tat, next_start = pace.admit(now, len(tenant_rows))
        paces[tenant_id] = tat
        admitted.extend(tenant_rows[:count])
        if count < len(tenant_rows):
            postponed[next_start].extend(r.id for r in tenant_rows[count:])
    contents = await _write_claim(txn, node, token, now + lease, paces, postponed, admitted)
    return Claimed(admitted, min(postponed) if postponed else None, contents)


#: A claim's writes, and what its admitted rows send (``delivery_contents``): the paces, the
#: postponed rows' turns, the admitted rows' lease.
WRITE_CLAIM = delivery_contents.select(
    "UPDATE deliveries SET due_at = %(until)s, claim = %(token)s, claimed_by = %(node)s, claimed_until = %(until)s"
    " WHERE id = ANY(%(admitted)s::uuid[]) RETURNING id, email_id, message",
    writes="paces AS (INSERT INTO delivery_pace AS p (tenant_id, tat)"
    "   SELECT * FROM unnest(%(pace_tenants)s::uuid[], %(pace_tats)s::float8[])"
    "   ON CONFLICT (tenant_id) DO UPDATE SET tat = excluded.tat),"
    " postponed AS (UPDATE deliveries d SET due_at = v.due_at"
    "   FROM unnest(%(postponed)s::uuid[], %(turns)s::timestamptz[]) AS v(id, due_at) WHERE d.id = v.id),",
)


async def _write_claim(txn: Transaction, node: str, token: uuid.UUID, until: float, paces: dict[uuid.UUID, float],
                       postponed: dict[float, list[uuid.UUID]], admitted: list[ClaimedDelivery]) -> Contents:
    """The claim's paces, its postponed rows' turns and its admitted rows' lease written, in one
    statement that reads what the admitted rows send."""
    turns = sorted((i, timefmt.from_seconds(due)) for due, ids in postponed.items() for i in ids)
    rows = await txn.fetchall(WRITE_CLAIM, {
        "pace_tenants": list(paces), "pace_tats": list(paces.values()),
        "postponed": [i for i, _ in turns], "turns": [t for _, t in turns],
        "until": timefmt.from_seconds(until), "token": token, "node": node, "admitted": [r.id for r in admitted],
    })
    return delivery_contents.parse(rows)


def _account(row: dict) -> ClaimedAccount:
    return ClaimedAccount(row["tenant_id"], row["status"], row["status_reason"], row["send_rate_per_sec"],
                          row["delivery_mode"])


def _claimed(row: dict) -> ClaimedDelivery:
    return ClaimedDelivery(row["id"], row["email_id"], row["recipient"], row["attempts"], float(row["retry_until"]),
                           row["own_message"], _account(row), row["bulk"])


async def sweep(db: Database, clock) -> None:
    """What the claim leaves to the queue's sweep: suspended accounts' queues failed, held
    accounts' new mail held (docs/decisions.md, "A fair claim")."""
    await fail_suspended(db, clock)
    await hold_held_accounts(db, clock)


async def _hold_standing(txn: Transaction, taken: list[ClaimedDelivery]) -> list[ClaimedDelivery]:
    """The deliveries the delivery policy admits under the standing holds (store/queue.py);
    those it holds are held now."""
    rows = await txn.fetchall("SELECT kind, value, reason FROM queue_holds") if taken else []
    if not rows:
        return taken
    holds = policy.Holds.of((h["kind"], h["value"], h["reason"]) for h in rows)
    held: dict[str, list[uuid.UUID]] = defaultdict(list)
    free = []
    for delivery in taken:
        admitted = policy.resolve(delivery.account, delivery.queue_destination, holds=holds).admission
        if admitted.verdict == policy.HOLD:
            held[admitted.reason or ""].append(delivery.id)
        else:
            free.append(delivery)
    for reason, ids in held.items():
        await txn.execute("UPDATE deliveries SET held_reason = %s, due_at = NULL WHERE id = ANY(%s::uuid[])",
                          (reason, ids))
    return free


async def _paces(txn: Transaction, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, float]:
    if not tenant_ids:
        return {}
    rows = await txn.fetchall(
        "SELECT tenant_id, tat FROM delivery_pace WHERE tenant_id = ANY(%s::uuid[]) ORDER BY tenant_id FOR UPDATE",
        (tenant_ids,),
    )
    return {r["tenant_id"]: r["tat"] for r in rows}


class Renewals:
    """
    Leases renewed right before DATA: the update is the proof that no other node took the
    deliveries. The renewals that arrive while one is written are written together by the next
    statement (``store.groupcommit``), each caller told about its own rows.
    """

    def __init__(self, db: Database, clock, lease: float):
        self._db = db
        self._clock = clock
        self._lease = lease
        self._group: GroupCommit[tuple[list[uuid.UUID], uuid.UUID], bool] = GroupCommit(
            self._write, concurrent=2, max_requests=RENEWALS_PER_STATEMENT, max_bytes=RENEWALS_PER_STATEMENT * 50)

    async def renew(self, ids: list[uuid.UUID], token: uuid.UUID) -> bool:
        """A full lease again for claimed deliveries, if ``token`` still holds every one of them."""
        return await self._group.add((ids, token), len(ids))

    async def _write(self, requests: list[tuple[list[uuid.UUID], uuid.UUID]]) -> list[bool]:
        until = timefmt.from_seconds(self._clock.seconds() + self._lease)
        pairs = sorted((i, token) for ids, token in requests for i in ids)
        renewed = {r["id"] for r in await self._db.fetchall(
            "UPDATE deliveries d SET due_at = %s, claimed_until = %s"
            " FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, claim)"
            " WHERE d.id = v.id AND d.claim = v.claim RETURNING d.id",
            (until, until, [i for i, _ in pairs], [t for _, t in pairs]), desc="renew delivery leases",
        )}
        return [all(i in renewed for i in ids) for ids, _ in requests]


async def record(db: Database, clock, outcomes: list[Outcome], *, suppress: Suppress) -> int:
    """Write outcomes (and what they cause: the recipients of hard bounces and complaints are
    ``suppress``ed) in one transaction; returns how many applied."""
    return await db.run("record_delivery_outcomes", delivery_outcomes.write, clock, outcomes, suppress)


async def write_failures(txn: Transaction, clock, outcomes: list[Outcome]) -> int:
    """Write failures (which suppress nobody) in the caller's transaction; how many applied."""
    return await delivery_outcomes.write(txn, clock, outcomes, None)


async def release(db: Database, clock, abandoned: list[tuple[ClaimedDelivery, uuid.UUID]]) -> None:
    """Give claimed deliveries back at once (a stopping node), for any node to take."""
    await db.execute(
        "UPDATE deliveries d SET due_at = %s, claim = NULL, claimed_by = NULL, claimed_until = NULL"
        " FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, claim) WHERE d.id = v.id AND d.claim = v.claim",
        (timefmt.from_seconds(clock.seconds()), [w.id for w, _ in abandoned], [t for _, t in abandoned]),
        desc="release deliveries",
    )


async def release_held(txn: Transaction, tenant_id: uuid.UUID, now: datetime) -> None:
    """Mail held back while its account was paused becomes due now (and is still paced)."""
    await txn.execute(
        "UPDATE deliveries SET due_at = %s"
        " WHERE tenant_id = %s AND status = 'queued' AND claim IS NULL AND due_at > %s",
        (now, tenant_id, now),
    )
