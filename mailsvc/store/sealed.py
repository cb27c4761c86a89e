"""Every column holding a sealed value, read and rewritten for a master-key rotation."""

from __future__ import annotations

import uuid

from mailsvc.store.database import Database

#: (table, sealed column): each table's key is its ``id``.
WEBHOOK_SECRET = ("webhooks", "secret")
WEBHOOK_PREVIOUS_SECRET = ("webhooks", "previous_secret")
DKIM_PRIVATE_KEY = ("dkim_keys", "private_key")


async def not_starting_with(db: Database, column: tuple[str, str], header: bytes, limit: int) -> list[dict]:
    """Up to ``limit`` rows whose sealed value does not start with ``header`` (not sealed
    under the current key), as ``id`` and ``sealed``."""
    table, name = column
    return await db.fetchall(
        f"SELECT id, {name} AS sealed FROM {table}"
        f" WHERE {name} IS NOT NULL AND substring({name} FROM 1 FOR %s) <> %s LIMIT %s",
        (len(header), header, limit), desc=f"stale seals in {table}.{name}",
    )


async def replace(db: Database, column: tuple[str, str], row_id: uuid.UUID, old: bytes, new: bytes) -> bool:
    """Write ``new`` where the value is still ``old`` (a concurrent change wins)."""
    table, name = column
    row = await db.fetchone(
        f"UPDATE {table} SET {name} = %s WHERE id = %s AND {name} = %s RETURNING id",
        (new, row_id, old), desc=f"reseal {table}.{name}",
    )
    return row is not None
