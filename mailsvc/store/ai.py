"""
Rows of the AI helper and of brand import limits: the per-minute windows every node shares
(``minute_window``), the monthly AI usage (``ai_usage``) and the holds of generations under
way (``ai_holds``), so that two nodes never both spend the last unit of a quota.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from mailsvc.store.database import Database, Transaction


async def take_window(txn: Transaction, tenant_id: uuid.UUID, kind: str, now: float, limit: int,
                      period: float = 60) -> float | None:
    """Count one request of ``kind``: None if it is allowed, else the seconds until one is."""
    await txn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s || ':' || %s::text, 0))", (kind, tenant_id))
    await txn.execute("DELETE FROM minute_window WHERE tenant_id = %s AND kind = %s AND at <= %s",
                      (tenant_id, kind, now - period))
    row: dict[str, Any] = await txn.fetchrow(
        "SELECT count(*) AS n, min(at) AS oldest FROM minute_window WHERE tenant_id = %s AND kind = %s",
        (tenant_id, kind))
    if row["n"] >= limit:
        return row["oldest"] + period - now
    await txn.execute("INSERT INTO minute_window (tenant_id, kind, at) VALUES (%s, %s, %s)", (tenant_id, kind, now))
    return None


async def used(db: Database, tenant_id: uuid.UUID, month: date) -> int:
    row = await db.fetchone("SELECT used FROM ai_usage WHERE tenant_id = %s AND month = %s", (tenant_id, month))
    return row["used"] if row else 0


async def hold(txn: Transaction, tenant_id: uuid.UUID, month: date, quota: int, hold_id: uuid.UUID, now: float,
               hold_seconds: float) -> bool:
    """One unit of the month's quota held for ``hold_id``, if used + live holds stay below ``quota``."""
    await txn.execute("SELECT pg_advisory_xact_lock(hashtextextended('ai_quota:' || %s::text, 0))", (tenant_id,))
    await txn.execute("DELETE FROM ai_holds WHERE tenant_id = %s AND expires_at <= %s", (tenant_id, now))
    row: dict[str, Any] = await txn.fetchrow(
        "SELECT COALESCE((SELECT used FROM ai_usage WHERE tenant_id = %(t)s AND month = %(m)s), 0)"
        " + (SELECT count(*) FROM ai_holds WHERE tenant_id = %(t)s AND month = %(m)s) AS n",
        {"t": tenant_id, "m": month})
    if row["n"] >= quota:
        return False
    await txn.execute("INSERT INTO ai_holds (id, tenant_id, month, expires_at) VALUES (%s, %s, %s, %s)",
                      (hold_id, tenant_id, month, now + hold_seconds))
    return True


async def charge(txn: Transaction, hold_id: uuid.UUID, tenant_id: uuid.UUID, month: date) -> None:
    """The held unit becomes a used one (a document was returned)."""
    await txn.execute("DELETE FROM ai_holds WHERE id = %s", (hold_id,))
    await txn.execute(
        "INSERT INTO ai_usage (tenant_id, month, used) VALUES (%s, %s, 1)"
        " ON CONFLICT (tenant_id, month) DO UPDATE SET used = ai_usage.used + 1", (tenant_id, month))


async def release(db: Database, hold_id: uuid.UUID) -> None:
    await db.execute("DELETE FROM ai_holds WHERE id = %s", (hold_id,))


async def save_file(db: Database, file_id: uuid.UUID, tenant_id: uuid.UUID, digest: bytes, content_type: str,
                    body: bytes, now: datetime) -> uuid.UUID:
    """A brand file stored (once per account and content): its id."""
    row = await db.fetchrow(
        "INSERT INTO brand_files (id, tenant_id, sha256, content_type, body, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (tenant_id, sha256) DO UPDATE SET content_type = brand_files.content_type RETURNING id",
        (file_id, tenant_id, digest, content_type, body, now))
    return row["id"]


async def brand_file(db: Database, file_id: uuid.UUID) -> dict | None:
    return await db.fetchone("SELECT content_type, body FROM brand_files WHERE id = %s", (file_id,))
