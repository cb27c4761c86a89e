"""
Rows of the suppression list, and its reads and writes inside the statements of others;
addresses compared in their normal form (``domain.suppression.normal_form``). Sending paths
call ``suppressed_for(db_or_txn, {tenant_id: recipients})`` once, just before the accepting
statement (or in the releasing transaction); each address it returns is skipped (an
``email.suppressed`` event, ``reason`` its origin; not counted against quotas).
Writes change the list alone: keeping contacts in step is ``mailsvc.app.suppressions``'s job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime

from mailsvc import timefmt
from mailsvc.domain.errors import Invalid
from mailsvc.domain.paging import Page
from mailsvc.domain.suppression import ORIGINS, ORIGINS_BY_STRENGTH, normal_form
from mailsvc.ids import uuid7
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

COLUMNS = "id, email, origin, source_id, created_at"

# One statement adds every address or strengthens the record it already has. It always
# updates a conflicting row (possibly to itself), so it always returns it and holds its lock:
# concurrent adds of one address apply one after the other.
_UPSERT = (
    "INSERT INTO suppressions (id, tenant_id, email, origin, source_id, created_at)"
    " SELECT new.id, %(tenant_id)s, new.email, %(origin)s, %(source_id)s::uuid, %(now)s"
    " FROM unnest(%(ids)s::uuid[], %(emails)s::text[]) AS new (id, email)"
    " ORDER BY new.email"  # one lock order for every batch: no deadlock between two of them
    " ON CONFLICT (tenant_id, email) DO UPDATE SET"
    " origin = CASE WHEN {stronger} THEN excluded.origin ELSE suppressions.origin END,"
    " source_id = CASE WHEN {stronger} THEN excluded.source_id ELSE suppressions.source_id END"
    f" RETURNING {COLUMNS}, (xmax = 0) AS inserted"
).format(
    stronger="array_position(%(strength)s::text[], excluded.origin)"
    " > array_position(%(strength)s::text[], suppressions.origin)"
)


async def upsert(
    txn: Transaction,
    tenant_id: uuid.UUID,
    entries: list[tuple[uuid.UUID, str]],
    origin: str,
    source_id: uuid.UUID | str | None,
    now: datetime,
) -> dict[str, dict]:
    """Add (id, address) entries of one origin; the rows by address, new or kept."""
    rows = await txn.fetchall(
        _UPSERT,
        {
            "tenant_id": tenant_id,
            "origin": origin,
            "source_id": str(source_id) if source_id is not None else None,
            "now": now,
            "ids": [entry_id for entry_id, _ in entries],
            "emails": [email for _, email in entries],
            "strength": list(ORIGINS_BY_STRENGTH),
        },
    )
    return {row["email"]: row for row in rows}


async def origins_of(
    db: Database | Transaction, pairs: list[tuple[uuid.UUID, str]]
) -> dict[tuple[uuid.UUID, str], str]:
    """The origin of each ``(tenant_id, email)`` of ``pairs`` that is on its account's list."""
    rows = await db.fetchall(
        "SELECT s.tenant_id, s.email, s.origin FROM suppressions s"
        " JOIN unnest(%s::uuid[], %s::text[]) AS wanted (tenant_id, email)"
        " ON s.tenant_id = wanted.tenant_id AND s.email = wanted.email",
        ([tenant_id for tenant_id, _ in pairs], [email for _, email in pairs]),
    )
    return {(row["tenant_id"], row["email"]): row["origin"] for row in rows}


def _where(key: uuid.UUID | str) -> str:
    return "id = %s" if isinstance(key, uuid.UUID) else "email = %s"


async def get(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    """The record with this id or (normal-form) address."""
    return await db.fetchone(
        f"SELECT {COLUMNS} FROM suppressions WHERE tenant_id = %s AND {_where(key)}",
        (tenant_id, key),
    )


async def delete(txn: Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    return await txn.fetchone(
        f"DELETE FROM suppressions WHERE tenant_id = %s AND {_where(key)} RETURNING {COLUMNS}",
        (tenant_id, key),
    )


async def delete_many(
    txn: Transaction,
    tenant_id: uuid.UUID,
    emails: list[str],
    ids: list[uuid.UUID],
    origins: tuple[str, ...] = ORIGINS_BY_STRENGTH,
) -> list[dict]:
    """Remove the records of these origins with any of these addresses or ids; the removed rows."""
    return await txn.fetchall(
        "DELETE FROM suppressions WHERE tenant_id = %s"
        " AND (email = ANY(%s::text[]) OR id = ANY(%s::uuid[])) AND origin = ANY(%s::text[])"
        f" RETURNING {COLUMNS}",
        (tenant_id, emails, ids, list(origins)),
    )


async def page(
    db: Database, tenant_id: uuid.UUID, page: Page, origin: str | None
) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    origin_condition, origin_params = ("origin = %s", [origin]) if origin else ("TRUE", [])
    rows = await db.fetchall(
        f"SELECT {COLUMNS} FROM suppressions"
        f" WHERE tenant_id = %s AND {origin_condition} AND {where} {order}",
        [tenant_id, *origin_params, *params],
    )
    return page.finish(rows)


def normal_or_none(address: str) -> str | None:
    try:
        return normal_form(address)
    except Invalid:
        return None


async def suppressed_for(
    db_or_txn: Database | Transaction, addresses: Mapping[uuid.UUID, Iterable[str]]
) -> dict[uuid.UUID, dict[str, str]]:
    """
    Which of each account's ``addresses`` are suppressed: by account, each such address,
    exactly as given, mapped to its record's origin (accounts with none are left out). One
    query for all; none when no address is given. An address with no valid normal form
    cannot be on the list and is never returned.
    """
    given = {(tenant_id, address): normal_or_none(address)
             for tenant_id, some in addresses.items() for address in some}
    wanted = sorted({(tenant_id, normal) for (tenant_id, _), normal in given.items() if normal is not None})
    if not wanted:
        return {}
    origins = await origins_of(db_or_txn, wanted)
    found: dict[uuid.UUID, dict[str, str]] = {}
    for (tenant_id, address), normal in given.items():
        origin = origins.get((tenant_id, normal)) if normal is not None else None
        if origin is not None:
            found.setdefault(tenant_id, {})[address] = origin
    return found


async def add_many(
    txn: Transaction,
    clock,
    tenant_id: uuid.UUID,
    addresses: Iterable[str],
    origin: str,
    source_id: uuid.UUID | str | None = None,
) -> list[dict]:
    """
    Put every address on the list within ``txn``. An address already there keeps its record
    (id, created_at); it takes ``origin`` and ``source_id`` only if ``origin`` is stronger
    (ORIGINS_BY_STRENGTH). Returns one row per distinct address, in the order given: ``id``,
    ``email`` (normal form), ``origin``, ``source_id``, ``created_at``, and ``inserted``
    (whether it is new). Raises Invalid for an address that is no valid e-mail address.
    """
    if origin not in ORIGINS:
        raise ValueError(f"unknown suppression origin {origin!r}")
    normals = list(dict.fromkeys(normal_form(address) for address in addresses))
    if not normals:
        return []
    now = clock.seconds()
    entries = [(uuid7(now), normal) for normal in normals]
    by_email = await upsert(txn, tenant_id, entries, origin, source_id, timefmt.from_seconds(now))
    return [by_email[normal] for normal in normals]


async def add(
    txn: Transaction,
    clock,
    tenant_id: uuid.UUID,
    address: str,
    origin: str,
    source_id: uuid.UUID | str | None = None,
) -> dict:
    """``add_many`` for one address: its record, new or kept."""
    (row,) = await add_many(txn, clock, tenant_id, [address], origin, source_id)
    return row
