"""Rows of the operator's audit log and of the named operator tokens."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from mailsvc.domain.audit import (
    ACTOR_PREFIXES,
    API_ACTOR_PREFIX,
    NOT_TOKEN_PREFIXES,
    SIGN_IN,
    SYSTEM_ACTOR,
    ActivityFilter,
    AuditFilter,
)
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
        if found.actor_kind == "token":
            conditions.append("NOT (actor LIKE ANY (%s)) AND actor <> %s")
            values += [[prefix + "%" for prefix in NOT_TOKEN_PREFIXES], SYSTEM_ACTOR]
        else:
            conditions.append("actor LIKE ANY (%s)")
            values.append([ACTOR_PREFIXES[found.actor_kind] + "%"])
    if found.tenant_id is not None:
        conditions.append("(detail->>'tenant_id' = %s OR filter->>'tenant_id' = %s)")
        values += [str(found.tenant_id)] * 2
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT id, at, actor, action, filter, count, detail FROM audit_log"
        f" WHERE {' AND '.join([*conditions, where])} {order}", values + params, desc="audit log",
    )
    return page.finish(rows)


async def activity(db: Database, tenant_id: uuid.UUID, page: Page,
                   found: ActivityFilter = ActivityFilter()) -> tuple[list[dict], bool]:
    """
    A page of an account's activity, newest first: the log's entries about it and its users'
    sign-ins (each a session made, as an entry ``user.sign_in`` of its user), ids (UUIDv7, of
    the time each was made) the order and the cursor. Each row has its acting user's address
    (``actor_email``: None once the user is removed) or API key's name (``actor_key``).
    """
    user = ACTOR_PREFIXES["user"]
    parts: list[str] = []
    values: list[object] = []
    if found.audited:
        where, order, params = clause(page, "a.id")
        conditions = ["a.detail->>'tenant_id' = %s"]
        values.append(str(tenant_id))
        if found.prefixes:
            conditions.append("a.action LIKE ANY (%s)")
            values.append([prefix + "%" for prefix in found.prefixes])
        if found.member is not None:
            conditions.append("a.actor = %s")
            values.append(user + str(found.member))
        parts.append(f"(SELECT a.id, a.at, a.actor, a.action, a.detail FROM audit_log a"
                     f" WHERE {' AND '.join([*conditions, where])} {order})")
        values += params
    if found.sign_ins:
        where, order, params = clause(page, "s.id")
        conditions = ["s.tenant_id = %s"]
        values += [user, SIGN_IN, tenant_id]
        if found.member is not None:
            conditions.append("s.user_id = %s")
            values.append(found.member)
        parts.append(f"(SELECT s.id, s.created_at AS at, %s::text || s.user_id::text AS actor, %s::text AS action,"
                     f" jsonb_build_object('user_agent', s.user_agent, 'client', s.client) AS detail FROM sessions s"
                     f" WHERE {' AND '.join([*conditions, where])} {order})")
        values += params
    order = f"ORDER BY e.id {'ASC' if page.before is not None else 'DESC'} LIMIT %s"  # each part cut already
    rows = await db.fetchall(
        f"SELECT e.id, e.at, e.actor, e.action, e.detail, u.email AS actor_email, k.name AS actor_key"
        f" FROM ({' UNION ALL '.join(parts)}) e"
        f" LEFT JOIN users u ON u.id = CASE WHEN e.actor LIKE %s::text THEN substr(e.actor, %s::int)::uuid END"
        f" LEFT JOIN api_keys k ON k.id = CASE WHEN e.actor LIKE %s::text THEN substr(e.actor, %s::int)::uuid END"
        f" {order}",
        [*values, user + "%", len(user) + 1, API_ACTOR_PREFIX + "%", len(API_ACTOR_PREFIX) + 1, page.limit + 1],
        desc="activity",
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
