"""Whether the database answers (``/healthz``)."""

from __future__ import annotations

from mailsvc.store.database import Database


async def ping(db: Database) -> None:
    """Fails when PostgreSQL does not answer a trivial query."""
    await db.fetchone("SELECT 1 AS ok", desc="healthz")
