"""Rows of the operator's audit log and of the named operator tokens."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from mailsvc.domain.audit import ACTOR_PREFIXES, AuditFilter
from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause


async def write(db: Database | Transaction, entry_id: uuid.UUID, at: datetime, actor: str, action: str,
                filter: dict | None, count: int | None, detail: dict) -> None:
    await db.execute(
        "INSERT INTO audit_log (id, at, actor, action, filter, count, detail) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (entry_id, at, actor, action, json.dumps(filter) if filter is not None else None, count, json.dumps(detail)),
    )


async def entries(db: Database, page: Page, found: AuditFilter = AuditFilter()) -> tuple[list[dict], bool]:
    """A page of entries; of one kind of actor (by the prefix it writes), about one tenant (the
    ``tenant_id`` of its detail, or of the queue filter it acted on)."""
    conditions: list[str] = []
    values: list[object] = []
    if found.actor_kind is not None:
        prefixes = [prefix + "%" for prefix in ACTOR_PREFIXES.values()]
        if found.actor_kind == "token":
            conditions.append("NOT (actor LIKE ANY (%s))")
        else:
            conditions.append("actor LIKE ANY (%s)")
            prefixes = [ACTOR_PREFIXES[found.actor_kind] + "%"]
        values.append(prefixes)
    if found.tenant_id is not None:
        conditions.append("(detail->>'tenant_id' = %s OR filter->>'tenant_id' = %s)")
        values += [str(found.tenant_id)] * 2
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT id, at, actor, action, filter, count, detail FROM audit_log"
        f" WHERE {' AND '.join([*conditions, where])} {order}", values + params, desc="audit log",
    )
    return page.finish(rows)


async def insert_token(db: Database | Transaction, token_id: uuid.UUID, name: str, token_hmac: bytes,
                       now: datetime) -> dict | None:
    """The new token's row; None when the name is taken."""
    return await db.fetchone(
        "INSERT INTO operator_tokens (id, name, token_hmac, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (name) DO NOTHING RETURNING id, name, created_at, last_used_at",
        (token_id, name, token_hmac, now),
    )


async def use_token(db: Database, token_hmac: bytes, now: datetime) -> str | None:
    """The name of the token with this HMAC (its use noted), or None."""
    row = await db.fetchone(
        "UPDATE operator_tokens SET last_used_at = %s WHERE token_hmac = %s RETURNING name",
        (now, token_hmac), desc="operator token",
    )
    return row["name"] if row else None


async def tokens(db: Database) -> list[dict]:
    return await db.fetchall(
        "SELECT id, name, created_at, last_used_at FROM operator_tokens ORDER BY id DESC", desc="operator tokens",
    )


async def delete_token(db: Database | Transaction, token_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        "DELETE FROM operator_tokens WHERE id = %s RETURNING id, name", (token_id,),
    )
