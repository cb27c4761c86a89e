"""Rows of segments (which the legacy audience paths show too), always within one account."""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

COLUMNS = "id, name, created_at, updated_at"


async def insert(db: Database | Transaction, segment_id: uuid.UUID, tenant_id: uuid.UUID, name: str,
                 now: datetime) -> dict:
    return await db.fetchrow(
        f"INSERT INTO segments (id, tenant_id, name, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
        f" RETURNING {COLUMNS}",
        (segment_id, tenant_id, name, now, now),
    )


async def get(db: Database | Transaction, tenant_id: uuid.UUID, segment_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {COLUMNS} FROM segments WHERE tenant_id = %s AND id = %s", (tenant_id, segment_id))


async def rename(db: Database | Transaction, tenant_id: uuid.UUID, segment_id: uuid.UUID, name: str,
                 now: datetime) -> dict | None:
    return await db.fetchone(
        f"UPDATE segments SET name = %s, updated_at = %s WHERE tenant_id = %s AND id = %s RETURNING {COLUMNS}",
        (name, now, tenant_id, segment_id),
    )


async def delete(db: Database | Transaction, tenant_id: uuid.UUID, segment_id: uuid.UUID) -> dict | None:
    """Remove the segment and (by cascade) its memberships; the contacts stay."""
    return await db.fetchone(
        "DELETE FROM segments WHERE tenant_id = %s AND id = %s RETURNING id", (tenant_id, segment_id))


async def page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {COLUMNS} FROM segments WHERE tenant_id = %s AND {where} {order}", [tenant_id, *params])
    return page.finish(rows)


async def sizes(db: Database, tenant_id: uuid.UUID, most: int = 1000) -> list[dict]:
    """The account's newest segments with how many contacts each holds (the dashboard's picker)."""
    return await db.fetchall(
        "SELECT s.id, s.name, (SELECT count(*) FROM segment_contacts m WHERE m.segment_id = s.id) AS contacts"
        " FROM segments s WHERE s.tenant_id = %s ORDER BY s.id DESC LIMIT %s", (tenant_id, most))
