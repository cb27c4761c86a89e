"""
Rows of the template builder: each account's saved theme and brand (``builder_profiles``), the
first verified sending domain (the suggested website), and the template drafts whose html and
text are the renderer's output of their document (re-rendered when the theme changes).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from psycopg2.extras import Json

from mailsvc.store.database import Database, Transaction


async def profile(db: Database | Transaction, tenant_id: uuid.UUID) -> dict | None:
    """``{theme, brand}`` as saved (each None when never saved), or None for neither."""
    return await db.fetchone("SELECT theme, brand FROM builder_profiles WHERE tenant_id = %s", (tenant_id,))


async def save_profile(txn: Transaction, tenant_id: uuid.UUID, theme: dict, brand: dict | None,
                       now: datetime) -> dict:
    """The account's theme (and brand, unless None: the saved one is kept) written."""
    return await txn.fetchrow(
        "INSERT INTO builder_profiles (tenant_id, theme, brand, updated_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (tenant_id) DO UPDATE SET theme = EXCLUDED.theme,"
        " brand = COALESCE(EXCLUDED.brand, builder_profiles.brand), updated_at = EXCLUDED.updated_at"
        " RETURNING theme, brand",
        (tenant_id, Json(theme), Json(brand) if brand is not None else None, now),
    )


async def lock_profile(txn: Transaction, tenant_id: uuid.UUID) -> dict | None:
    return await txn.fetchone("SELECT theme, brand FROM builder_profiles WHERE tenant_id = %s FOR UPDATE",
                              (tenant_id,))


async def first_verified_domain(db: Database, tenant_id: uuid.UUID) -> str | None:
    row = await db.fetchone(
        "SELECT name FROM domains WHERE tenant_id = %s AND status = 'verified' ORDER BY created_at, id LIMIT 1",
        (tenant_id,))
    return row["name"] if row else None


async def rendered_drafts(txn: Transaction, tenant_id: uuid.UUID) -> list[dict]:
    """The drafts holding the renderer's output (locked, oldest first)."""
    return await txn.fetchall(
        "SELECT id, builder FROM templates WHERE tenant_id = %s AND builder_rendered ORDER BY id FOR UPDATE",
        (tenant_id,))


async def set_rendered(txn: Transaction, template_id: uuid.UUID, html: str, text: str, now: datetime) -> None:
    await txn.execute("UPDATE templates SET html = %s, text = %s, updated_at = %s WHERE id = %s",
                      (html, text, now, template_id))
