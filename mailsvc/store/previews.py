"""The dashboard's previews of HTML, shared by every process of every node (migration 0017)."""

from __future__ import annotations

import uuid

from mailsvc.store.database import Database


async def keep(db: Database, token: str, tenant_id: uuid.UUID, html: bytes, seconds: int, most: int) -> None:
    """
    Keep ``html`` under ``token`` for ``seconds``, in one statement that also drops every expired
    preview and the account's oldest beyond its ``most`` newest.
    """
    await db.execute(
        "WITH expired AS (DELETE FROM ui_previews WHERE expires_at < now()),"
        " crowded AS (DELETE FROM ui_previews WHERE token IN (SELECT token FROM ui_previews WHERE tenant_id = %s"
        "   ORDER BY expires_at DESC OFFSET %s))"
        " INSERT INTO ui_previews (token, tenant_id, html, expires_at)"
        " VALUES (%s, %s, %s, now() + make_interval(secs => %s))",
        (tenant_id, most - 1, token, tenant_id, html, seconds),
    )


async def get(db: Database, token: str, tenant_id: uuid.UUID) -> bytes | None:
    """The account's preview under ``token``, unless it expired."""
    row = await db.fetchone(
        "SELECT html FROM ui_previews WHERE token = %s AND tenant_id = %s AND expires_at >= now()",
        (token, tenant_id),
    )
    return bytes(row["html"]) if row is not None else None
