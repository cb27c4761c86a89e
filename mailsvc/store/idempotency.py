"""
Rows of idempotency keys. A claim is held by the request that wrote its ``locked_until``:
that value is the claim's token, and the final write (``COMPLETE``) and a release only touch
the row while it still holds it, so a request that outlived its lease changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.store.database import Database, Transaction

_CLAIM = (
    "INSERT INTO idempotency_keys AS k (tenant_id, key, request_hash, state, locked_until, expires_at)"
    " VALUES (%(t)s, %(k)s, %(h)s, 'pending', %(lock)s, %(exp)s)"
    " ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = %(h)s, state = 'pending',"
    "   status = NULL, response = NULL, locked_until = %(lock)s, expires_at = %(exp)s"
    " WHERE k.expires_at <= %(now)s"
    "    OR (k.state = 'pending' AND k.locked_until <= %(now)s AND k.request_hash = %(h)s)"
    " RETURNING locked_until"
)

#: Stores a claimed key's outcome while the claim holds; returns the key when it did. Its
#: parameters: status, response, tenant_id, key, token.
COMPLETE = (
    "UPDATE idempotency_keys SET state = 'done', status = %s, response = %s, locked_until = NULL"
    " WHERE tenant_id = %s AND key = %s AND state = 'pending' AND locked_until = %s RETURNING key"
)


async def claim(db: Database, tenant_id: uuid.UUID, key: str, digest: bytes, now: datetime,
                locked_until: datetime, expires_at: datetime) -> datetime | None:
    """Claim ``key`` (new, expired, or a twin's whose lease ran out); its token, or None if held."""
    row = await db.fetchone(
        _CLAIM,
        {"t": tenant_id, "k": key, "h": digest, "now": now, "lock": locked_until, "exp": expires_at},
        desc="claim_idempotency_key",
    )
    return row["locked_until"] if row is not None else None


async def get(db: Database, tenant_id: uuid.UUID, key: str) -> dict | None:
    return await db.fetchone(
        "SELECT request_hash, state, status, response FROM idempotency_keys WHERE tenant_id = %s AND key = %s",
        (tenant_id, key),
    )


async def complete(txn: Database | Transaction, tenant_id: uuid.UUID, key: str, token: datetime,
                   status: int, response: bytes) -> bool:
    """Store an outcome outside an accept statement; False when the claim no longer holds."""
    row = await txn.fetchone(COMPLETE, (status, response, tenant_id, key, token))
    return row is not None


async def release(db: Database, tenant_id: uuid.UUID, key: str, token: datetime) -> None:
    """Forget a claim, while it still holds."""
    await db.execute(
        "DELETE FROM idempotency_keys WHERE tenant_id = %s AND key = %s AND state = 'pending' AND locked_until = %s",
        (tenant_id, key, token),
    )
