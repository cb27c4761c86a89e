"""Rows of the suppression list. Addresses here are already in their normal form."""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.domain.suppression import ORIGINS_BY_STRENGTH
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import Page

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
    f" RETURNING {COLUMNS}"
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


async def delete(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    return await db.fetchone(
        f"DELETE FROM suppressions WHERE tenant_id = %s AND {_where(key)} RETURNING {COLUMNS}",
        (tenant_id, key),
    )


async def delete_many(
    db: Database | Transaction,
    tenant_id: uuid.UUID,
    emails: list[str],
    ids: list[uuid.UUID],
) -> list[dict]:
    """Remove the records with any of these addresses or ids; the removed rows."""
    return await db.fetchall(
        "DELETE FROM suppressions WHERE tenant_id = %s"
        " AND (email = ANY(%s::text[]) OR id = ANY(%s::uuid[]))"
        f" RETURNING {COLUMNS}",
        (tenant_id, emails, ids),
    )


async def page(
    db: Database, tenant_id: uuid.UUID, page: Page, origin: str | None
) -> tuple[list[dict], bool]:
    where, order, params = page.clause()
    origin_condition, origin_params = ("origin = %s", [origin]) if origin else ("TRUE", [])
    rows = await db.fetchall(
        f"SELECT {COLUMNS} FROM suppressions"
        f" WHERE tenant_id = %s AND {origin_condition} AND {where} {order}",
        [tenant_id, *origin_params, *params],
    )
    return page.finish(rows)
