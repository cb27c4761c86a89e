"""Rows of tenants, API keys and the waitlist."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from mailsvc.domain.paging import Page
from mailsvc.domain.tenant import Tenant
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

_TENANT_COLUMNS = (
    "id, name, plan, sandbox, status, status_reason, daily_quota, monthly_quota, max_domains,"
    " send_rate_per_sec, api_rate_per_sec, delivery_mode, created_at, updated_at"
)
_UPDATABLE = frozenset(
    {
        "name", "plan", "sandbox", "status", "status_reason", "daily_quota", "monthly_quota",
        "max_domains", "send_rate_per_sec", "api_rate_per_sec", "delivery_mode",
    }
)


def tenant_of(row: dict) -> Tenant:
    return Tenant(**{k: row[k] for k in _TENANT_COLUMNS.replace(" ", "").split(",")})


async def insert_tenant(txn: Transaction, tenant_id: uuid.UUID, fields: dict, now: datetime) -> Tenant | None:
    columns = ["id", *fields, "created_at", "updated_at"]
    row = await txn.fetchone(
        f"INSERT INTO tenants ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
        f" ON CONFLICT (id) DO NOTHING RETURNING {_TENANT_COLUMNS}",
        [tenant_id, *fields.values(), now, now],
    )
    return tenant_of(row) if row else None


async def get_tenant(db: Database | Transaction, tenant_id: uuid.UUID) -> Tenant | None:
    row = await db.fetchone(f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE id = %s", (tenant_id,))
    return tenant_of(row) if row else None


async def list_tenants(db: Database, name_contains: str | None, status: str | None,
                       page: Page) -> tuple[list[Tenant], bool]:
    """Tenants newest first, those whose name contains ``name_contains`` (any case) with ``status``."""
    where, order, params = clause(page)
    conditions, values = [where], list(params[:-1])
    if name_contains:
        escaped = name_contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append("name ILIKE %s")
        values.append(f"%{escaped}%")
    if status:
        conditions.append("status = %s")
        values.append(status)
    rows = await db.fetchall(
        f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE {' AND '.join(conditions)} {order}",
        [*values, params[-1]], desc="list tenants",
    )
    found, has_more = page.finish(rows)
    return [tenant_of(r) for r in found], has_more


async def update_tenant(
    txn: Transaction, tenant_id: uuid.UUID, changes: dict, now: datetime
) -> Tenant | None:
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    assignments = ", ".join(f"{column} = %s" for column in changes)
    row = await txn.fetchone(
        f"UPDATE tenants SET {assignments}{', ' if changes else ''}updated_at = %s"
        f" WHERE id = %s RETURNING {_TENANT_COLUMNS}",
        [*changes.values(), now, tenant_id],
    )
    return tenant_of(row) if row else None


# API keys

_KEY_COLUMNS = ("id, tenant_id, name, prefix, permission, domain_id, created_at, last_used_at, created_by,"
                " created_by_user_id, created_by_email")


async def insert_key(
    txn: Transaction,
    key_id: uuid.UUID,
    tenant_id: uuid.UUID,
    name: str,
    prefix: str,
    secret_hmac: bytes,
    permission: str,
    domain_id: uuid.UUID | None,
    now: datetime,
    created_by: str,
    created_by_user_id: uuid.UUID | None,
) -> dict:
    """The new key; made by a user, it keeps their address as it is now."""
    return await txn.fetchrow(
        "INSERT INTO api_keys (id, tenant_id, name, prefix, secret_hmac, permission, domain_id, created_at,"
        " created_by, created_by_user_id, created_by_email)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, (SELECT email FROM users WHERE id = %s))"
        f" RETURNING {_KEY_COLUMNS}",
        (key_id, tenant_id, name, prefix, secret_hmac, permission, domain_id, now, created_by,
         created_by_user_id, created_by_user_id),
    )


async def key_with_tenant(db: Database, prefix: str) -> dict | None:
    """The key with this public prefix, its stored HMAC and its tenant's columns."""
    return await db.fetchone(
        "SELECT k.id AS key_id, k.secret_hmac, k.permission, k.domain_id,"
        f" {', '.join('t.' + c.strip() for c in _TENANT_COLUMNS.split(','))}"
        " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.prefix = %s",
        (prefix,),
        desc="authenticate",
    )


async def list_keys(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = %s AND {where} {order}",
        [tenant_id, *params],
    )
    return page.finish(rows)


async def rename_key(db: Database, tenant_id: uuid.UUID, key_id: uuid.UUID, name: str) -> dict | None:
    return await db.fetchone(
        f"UPDATE api_keys SET name = %s WHERE tenant_id = %s AND id = %s RETURNING {_KEY_COLUMNS}",
        (name, tenant_id, key_id),
    )


#: NOTIFY channel of a change to an account's API keys or to the account itself (a key revoked,
#: the account suspended): every process drops its cached key checks of the account, whose id
#: is the payload.
KEYS_CHANNEL = "api_keys"


def notify_keys_changed(txn: Transaction, tenant_id: uuid.UUID) -> None:
    """Tell every process, at COMMIT, that its cached key checks of ``tenant_id`` are stale."""
    txn.notify(KEYS_CHANNEL, str(tenant_id))


async def delete_key(txn: Transaction, tenant_id: uuid.UUID, key_id: uuid.UUID) -> dict | None:
    return await txn.fetchone(
        "DELETE FROM api_keys WHERE tenant_id = %s AND id = %s RETURNING id, prefix, name",
        (tenant_id, key_id),
    )


async def delete_keys_made_by(txn: Transaction, tenant_id: uuid.UUID, user_id: uuid.UUID) -> list[dict]:
    """Revoke every key of the account that ``user_id`` made."""
    return await txn.fetchall(
        "DELETE FROM api_keys WHERE tenant_id = %s AND created_by_user_id = %s RETURNING id, prefix, name",
        (tenant_id, user_id),
    )


async def record_last_used(db: Database, used: dict[uuid.UUID, datetime]) -> None:
    """One statement for every key used since the last flush; never moves a time backwards."""
    if not used:
        return
    values = ", ".join(["(%s::uuid, %s::timestamptz)"] * len(used))
    params: list[Any] = []
    for key_id, when in used.items():
        params += [key_id, when]
    await db.execute(
        f"UPDATE api_keys k SET last_used_at = v.at FROM (VALUES {values}) AS v(id, at)"
        " WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.at)",
        params,
        desc="record_last_used",
    )


async def domain_of(db: Database, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> dict | None:
    """The tenant's domain with this id (a key may be restricted only to a verified one)."""
    return await db.fetchone(
        "SELECT id, name, status FROM domains WHERE tenant_id = %s AND id = %s",
        (tenant_id, domain_id),
    )


# Waitlist


async def join_waitlist(db: Database, entry_id: uuid.UUID, email: str, now: datetime) -> None:
    """Add the address unless it is there (a concurrent join of it waits, then does nothing)."""
    await db.execute(
        "INSERT INTO waitlist (id, email, created_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (email) DO NOTHING",
        (entry_id, email, now),
        desc="join_waitlist",
    )


async def list_waitlist(db: Database, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT id, email, created_at FROM waitlist WHERE {where} {order}", params
    )
    return page.finish(rows)
