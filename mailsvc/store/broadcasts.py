"""
Rows of broadcasts and of their recipients (the membership fixed when a send starts). Every
change of a broadcast's status is ONE guarded UPDATE (``WHERE status IN (...)``): of two nodes,
or of a cancel and the fan-out, exactly one wins.

The fan-out's work is in ``broadcast_recipients``: a chunk is claimed by giving pending rows a
lease (``FOR UPDATE SKIP LOCKED``, so two nodes take different rows), and turned ``written``
by the accept statement of its e-mails only while the rows still hold that lease and the
broadcast is still sending (``written_guard``): a recipient is written once, with its e-mail,
in one transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from mailsvc.domain.broadcasts import Contact
from mailsvc.domain.paging import Page
from mailsvc.store.accept import Guard, json_array
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

COLUMNS = (
    "id, tenant_id, name, segment_id, sender, subject, reply_to, preview_text, html, text, status,"
    " scheduled_at, started_at, sent_at, total, wait_reason, wait_until, failure, links_base,"
    " created_at, updated_at"
)
LIST_COLUMNS = "id, name, segment_id, status, scheduled_at, sent_at, created_at"
WRITABLE = frozenset({"name", "segment_id", "sender", "subject", "reply_to", "preview_text", "html", "text"})
#: NOTIFY channel that wakes the fan-out (a broadcast queued, released or resumed).
CHANNEL = "broadcasts"
#: A membership at least this large is followed by an ANALYZE of the recipients.
ANALYZE_AFTER = 10_000


@attrs.frozen
class Broadcast:
    """A broadcast as its resource reads it (``COLUMNS``)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    #: None: the segment was deleted.
    segment_id: uuid.UUID | None
    sender: str
    subject: str
    reply_to: list[str]
    preview_text: str | None
    html: str | None
    text: str | None
    status: str
    scheduled_at: datetime | None
    started_at: datetime | None
    sent_at: datetime | None
    #: Recipients in the membership fixed at start; None before.
    total: int | None
    wait_reason: str | None
    wait_until: datetime | None
    failure: str | None
    links_base: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Broadcast:
        return cls(*(row[a.name] for a in attrs.fields(cls)))


@attrs.frozen
class BroadcastItem:
    """A broadcast as its list reads it (``LIST_COLUMNS``)."""

    id: uuid.UUID
    name: str
    segment_id: uuid.UUID | None
    status: str
    scheduled_at: datetime | None
    sent_at: datetime | None
    created_at: datetime


async def wake_fanout(db: Database) -> None:
    """NOTIFY the fan-out nodes that a broadcast is ready (queued, released or resumed)."""
    await db.execute("SELECT pg_notify(%s, '')", (CHANNEL,))


async def insert(db: Database | Transaction, broadcast_id: uuid.UUID, tenant_id: uuid.UUID,
                 fields: dict[str, Any], status: str, scheduled_at: datetime | None, links_base: str | None,
                 now: datetime) -> Broadcast:
    columns = [c for c in fields if c in WRITABLE]
    names = "".join(f", {c}" for c in columns)
    marks = "".join(", %s" for _ in columns)
    return Broadcast.of(await db.fetchrow(
        "INSERT INTO broadcasts (id, tenant_id, status, scheduled_at, links_base, created_at, updated_at"
        f"{names}) VALUES (%s, %s, %s, %s, %s, %s, %s{marks}) RETURNING {COLUMNS}",
        [broadcast_id, tenant_id, status, scheduled_at, links_base, now, now, *(fields[c] for c in columns)],
    ))


def _broadcast(row: Mapping[str, Any] | None) -> Broadcast | None:
    return None if row is None else Broadcast.of(row)


async def get(db: Database | Transaction, tenant_id: uuid.UUID, broadcast_id: uuid.UUID) -> Broadcast | None:
    return _broadcast(await db.fetchone(f"SELECT {COLUMNS} FROM broadcasts WHERE tenant_id = %s AND id = %s",
                                        (tenant_id, broadcast_id)))


async def status(db: Database | Transaction, tenant_id: uuid.UUID, broadcast_id: uuid.UUID) -> str | None:
    row = await db.fetchone("SELECT status FROM broadcasts WHERE tenant_id = %s AND id = %s",
                            (tenant_id, broadcast_id))
    return None if row is None else row["status"]


async def page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[BroadcastItem], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {LIST_COLUMNS} FROM broadcasts WHERE tenant_id = %s AND {where} {order}", [tenant_id, *params])
    return page.finish([BroadcastItem(r["id"], r["name"], r["segment_id"], r["status"], r["scheduled_at"],
                                      r["sent_at"], r["created_at"]) for r in rows])


async def update_draft(db: Database | Transaction, tenant_id: uuid.UUID, broadcast_id: uuid.UUID,
                       fields: dict[str, Any], now: datetime) -> Broadcast | None:
    """Change a draft; None when it is absent or no longer a draft."""
    columns = [c for c in fields if c in WRITABLE]
    sets = "".join(f", {c} = %s" for c in columns)
    return _broadcast(await db.fetchone(
        f"UPDATE broadcasts SET updated_at = %s{sets} WHERE tenant_id = %s AND id = %s AND status = 'draft'"
        f" RETURNING {COLUMNS}",
        [now, *(fields[c] for c in columns), tenant_id, broadcast_id],
    ))


async def transition(db: Database | Transaction, tenant_id: uuid.UUID | None, broadcast_id: uuid.UUID,
                     before: tuple[str, ...], after: str, now: datetime, **also: Any) -> Broadcast | None:
    """
    The one guarded UPDATE of a status: ``before`` → ``after`` (and the ``also`` columns), or
    None when the broadcast is absent or in another state.
    """
    sets = "".join(f", {c} = %s" for c in also)
    tenant = " AND tenant_id = %s" if tenant_id is not None else ""
    return _broadcast(await db.fetchone(
        f"UPDATE broadcasts SET status = %s, updated_at = %s{sets}"
        f" WHERE id = %s{tenant} AND status = ANY(%s) RETURNING {COLUMNS}",
        [after, now, *also.values(), broadcast_id, *([tenant_id] if tenant_id else []), list(before)],
    ))


async def delete(db: Database | Transaction, tenant_id: uuid.UUID, broadcast_id: uuid.UUID,
                 at_once: tuple[str, ...], when_quiet: tuple[str, ...]) -> bool:
    """
    Delete a broadcast in one of the ``at_once`` states, or in one of the ``when_quiet`` states
    while no delivery of its e-mails is still queued (or deferred for a retry); False otherwise.
    """
    deleted = await db.fetchone(
        "DELETE FROM broadcasts b WHERE tenant_id = %s AND id = %s AND (status = ANY(%s) OR (status = ANY(%s)"
        " AND NOT EXISTS (SELECT 1 FROM broadcast_recipients r JOIN deliveries d ON d.email_id = r.email_id"
        "   WHERE r.broadcast_id = b.id AND r.email_id IS NOT NULL AND d.status IN ('queued', 'deferred'))))"
        " RETURNING id",
        (tenant_id, broadcast_id, list(at_once), list(when_quiet)))
    return deleted is not None


async def segment_exists(db: Database | Transaction, tenant_id: uuid.UUID, segment_id: uuid.UUID) -> bool:
    row = await db.fetchone("SELECT 1 AS one FROM segments WHERE tenant_id = %s AND id = %s", (tenant_id, segment_id))
    return row is not None


# Scheduled release (the scheduler role).

async def release_due(db: Database | Transaction, now: datetime) -> list[uuid.UUID]:
    """Scheduled broadcasts whose time has come become queued (one guarded UPDATE)."""
    rows = await db.fetchall(
        "UPDATE broadcasts SET status = 'queued', updated_at = %s"
        " WHERE status = 'scheduled' AND scheduled_at <= %s RETURNING id", (now, now))
    return [r["id"] for r in rows]


# Starting: queued → sending, with the membership fixed.

async def start_next(txn: Transaction, now: datetime) -> Broadcast | None:
    """
    Take one queued broadcast (SKIP LOCKED: each is started by one node) and start it: its
    segment's members at this moment become its recipients, and it is `sending` (or `failed`
    when its segment is gone), in this transaction. Copying a segment of a million members
    takes longer than ``database.statement_timeout`` on a busy node (the broadcast then never
    started, its copy cancelled at every try), so this transaction has no deadline; it locks
    only the broadcast's row, and a database that goes away ends it.
    """
    row = await txn.fetchone(
        "SELECT id, segment_id FROM broadcasts WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
    if row is None:
        return None
    if row["segment_id"] is None:
        return await transition(txn, None, row["id"], ("queued",), "failed", now, failure="segment_deleted")
    await txn.lift_deadlines()
    inserted = await txn.execute(
        "INSERT INTO broadcast_recipients (broadcast_id, contact_id)"
        " SELECT %s, contact_id FROM segment_contacts WHERE segment_id = %s",
        (row["id"], row["segment_id"]))
    if inserted >= ANALYZE_AFTER:
        # So many new rows at once: the planner learns of them now, not at autovacuum's turn
        # (the chunks' claims must use the index of pending rows).
        await txn.execute("ANALYZE broadcast_recipients")
    # A broadcast starts once, in this transaction: what was inserted is all its recipients.
    started = await txn.fetchone(
        "UPDATE broadcasts SET status = 'sending', started_at = %s, updated_at = %s, total = %s"
        f" WHERE id = %s AND status = 'queued' RETURNING {COLUMNS}",
        (now, now, inserted, row["id"]))
    return _broadcast(started)


# The fan-out.

#: A sending broadcast, as the fan-out reads it: the row of its columns.
BroadcastRow = Broadcast


@attrs.frozen
class ClaimedRecipient:
    """A recipient of a claimed chunk, with the contact as it is now."""

    contact_id: uuid.UUID
    #: None: the contact was deleted since the send started.
    contact: Contact | None

async def ready(db: Database, now: datetime, limit: int) -> list[Broadcast]:
    """Sending broadcasts with nothing to wait for, oldest first."""
    found = await db.fetchall(
        f"SELECT {COLUMNS} FROM broadcasts WHERE status = 'sending' AND (wait_until IS NULL OR wait_until <= %s)"
        " ORDER BY id LIMIT %s", (now, limit))
    return [Broadcast.of(r) for r in found]


async def wait(db: Database, broadcast_id: uuid.UUID, reason: str | None, until: datetime | None,
               now: datetime) -> None:
    """A sending broadcast waits (``reason`` until ``until``) or, with None, goes on."""
    await db.execute(
        "UPDATE broadcasts SET wait_reason = %s, wait_until = %s, updated_at = %s"
        " WHERE id = %s AND status = 'sending'"
        " AND (wait_reason IS DISTINCT FROM %s OR wait_until IS DISTINCT FROM %s)",
        (reason, until, now, broadcast_id, reason, until))


async def remaining_quota(db: Database, tenant_id: uuid.UUID, daily: int, monthly: int,
                          now: datetime) -> tuple[int, str]:
    """Recipients the account may still be charged for now, and the period that limits it."""
    rows = await db.fetchall(
        "SELECT period, count FROM usage WHERE tenant_id = %s AND period IN (%s, %s)",
        (tenant_id, f"day:{now:%Y-%m-%d}", f"month:{now:%Y-%m}"))
    used = {r["period"][:3]: r["count"] for r in rows}
    day_left = daily - used.get("day", 0)
    month_left = monthly - used.get("mon", 0)
    return (day_left, "daily") if day_left <= month_left else (month_left, "monthly")


async def claim(txn: Transaction, broadcast_id: uuid.UUID, lease: uuid.UUID, now: datetime, seconds: float,
                limit: int, after: uuid.UUID | None = None) -> list[ClaimedRecipient]:
    """
    The next chunk of pending recipients by keyset (contact order, from just after ``after``,
    the last contact this node claimed), skipping rows another node has locked or leased, leased
    to ``lease``, with the contacts as they are now (``email`` None: the contact was deleted since
    the send started). The keyset keeps each claim from walking again over the index entries of
    the rows already written (dead until vacuumed).
    """
    keyset = " AND contact_id > %s" if after is not None else ""
    found = await txn.fetchall(
        "WITH chunk AS (SELECT contact_id FROM broadcast_recipients"
        "   WHERE broadcast_id = %s AND state = 'pending' AND (lease_until IS NULL OR lease_until < %s)"
        f"{keyset} ORDER BY contact_id LIMIT %s FOR UPDATE SKIP LOCKED),"
        " leased AS (UPDATE broadcast_recipients r SET lease = %s, lease_until = %s FROM chunk"
        "   WHERE r.broadcast_id = %s AND r.contact_id = chunk.contact_id RETURNING r.contact_id)"
        " SELECT l.contact_id, c.email, c.first_name, c.last_name, c.properties"
        " FROM leased l LEFT JOIN contacts c ON c.id = l.contact_id ORDER BY l.contact_id",
        (broadcast_id, now, *([after] if after is not None else []), limit, lease,
         now + timedelta(seconds=seconds), broadcast_id))
    return [ClaimedRecipient(r["contact_id"], None if r["email"] is None else Contact(
        r["contact_id"], r["email"], r["first_name"], r["last_name"], r["properties"] or {})) for r in found]


def written_guard(broadcast_id: uuid.UUID, lease: uuid.UUID,
                  rows: list[tuple[uuid.UUID, uuid.UUID | None, str, dict | None]]) -> Guard:
    """
    The part of an accept statement that records a chunk: each (contact, e-mail, state, the
    contact's snapshot) row, only while it still holds ``lease``, is pending, and the broadcast
    is still sending (its row locked FOR SHARE, so a cancel waits for the chunk or the chunk
    sees the cancel). Anything less than every row fails the whole statement (``LeaseLost``).
    """
    # One JSON array per column (``unnest``), whatever the chunk's size: its cost does not grow
    # with a placeholder per value (store/accept.columnar).
    sql = (
        "UPDATE broadcast_recipients r SET state = v.state, email_id = v.email_id, snapshot = v.snapshot,"
        " lease = NULL, lease_until = NULL"
        f" FROM unnest({json_array('uuid')}, {json_array('uuid')}, {json_array('text')}, {json_array('jsonb')})"
        " AS v (contact_id, email_id, state, snapshot)"
        " WHERE r.broadcast_id = %s AND r.contact_id = v.contact_id AND r.lease = %s AND r.state = 'pending'"
        " AND EXISTS (SELECT 1 FROM broadcasts b WHERE b.id = %s AND b.status = 'sending' FOR SHARE)"
        " RETURNING 1")
    columns = ([str(contact_id) for contact_id, _, _, _ in rows],
               [None if email_id is None else str(email_id) for _, email_id, _, _ in rows],
               [state for _, _, state, _ in rows],
               [None if taken is None else json.dumps(taken, ensure_ascii=False) for _, _, _, taken in rows])
    parameters = [*(json.dumps(column, ensure_ascii=False) for column in columns), broadcast_id, lease, broadcast_id]
    return Guard(sql, parameters, len(rows))


async def record(db: Database, guard: Guard) -> bool:
    """A guard's rows written alone (a chunk with no e-mail to accept); False if the lease was lost."""
    rows = await db.fetchall(guard.sql, guard.parameters)
    return len(rows) == guard.expected


async def release(db: Database, broadcast_id: uuid.UUID, lease: uuid.UUID) -> None:
    """Give back a chunk not written (a quota, a pause): its rows are pending and free again."""
    await db.execute(
        "UPDATE broadcast_recipients SET lease = NULL, lease_until = NULL"
        " WHERE broadcast_id = %s AND lease = %s AND state = 'pending'", (broadcast_id, lease))


async def finish(db: Database, broadcast_id: uuid.UUID, now: datetime) -> dict | None:
    """`sent` once no recipient is pending (one guarded UPDATE; None when some still are)."""
    return await db.fetchone(
        "UPDATE broadcasts b SET status = 'sent', sent_at = %s, updated_at = %s, wait_reason = NULL,"
        " wait_until = NULL WHERE id = %s AND status = 'sending' AND NOT EXISTS"
        " (SELECT 1 FROM broadcast_recipients r WHERE r.broadcast_id = b.id AND r.state = 'pending')"
        " RETURNING id", (now, now, broadcast_id))


# Counts.

async def counts(db: Database, broadcast_id: uuid.UUID) -> dict[str, int]:
    """Recipients by state."""
    rows = await db.fetchall(
        "SELECT state, count(*) AS n FROM broadcast_recipients WHERE broadcast_id = %s GROUP BY state",
        (broadcast_id,))
    return {r["state"]: r["n"] for r in rows}


async def delivery_counts(db: Database, broadcast_id: uuid.UUID) -> dict[str, int]:
    """The broadcast's e-mails' deliveries by status, read from the delivery rows."""
    rows = await db.fetchall(
        "SELECT d.status, count(*) AS n FROM broadcast_recipients r JOIN deliveries d ON d.email_id = r.email_id"
        " WHERE r.broadcast_id = %s AND r.email_id IS NOT NULL GROUP BY d.status", (broadcast_id,))
    return {r["status"]: r["n"] for r in rows}


async def sample_contact(db: Database, tenant_id: uuid.UUID, segment_id: uuid.UUID | None,
                         contact_id: uuid.UUID | None) -> Contact | None:
    """A contact of the account for a preview: the one named, else the segment's newest member."""
    if contact_id is not None:
        found = await db.fetchone(
            "SELECT id, email, first_name, last_name, properties FROM contacts WHERE tenant_id = %s AND id = %s",
            (tenant_id, contact_id))
    elif segment_id is not None:
        found = await db.fetchone(
            "SELECT c.id, c.email, c.first_name, c.last_name, c.properties FROM segment_contacts sc"
            " JOIN contacts c ON c.id = sc.contact_id WHERE sc.segment_id = %s AND c.tenant_id = %s"
            " ORDER BY sc.contact_id DESC LIMIT 1", (segment_id, tenant_id))
    else:
        return None
    return None if found is None else Contact(found["id"], found["email"], found["first_name"], found["last_name"],
                                              found["properties"] or {})
