"""Rows of domains, their DKIM keys, the check scheduler's claims and DNS set-up counts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg2 import errors as pgerrors
from psycopg2.extras import Json

from mailsvc.domain.errors import Taken
from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

_COLUMNS = (
    "id, tenant_id, name, status, return_path, tls, region, record_status, created_at,"
    " updated_at, window_started, checks, last_checked_at, suspect_since, next_check_at"
)
_KEY_COLUMNS = "id, domain_id, selector, algorithm, public_key, created_at"


async def lock_tenant(txn: Transaction, tenant_id: uuid.UUID) -> dict:
    """The tenant's domain limit, its row locked so that concurrent creations count in turn."""
    return await txn.fetchrow(
        "SELECT max_domains FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,)
    )


async def count_domains(txn: Transaction, tenant_id: uuid.UUID) -> int:
    row = await txn.fetchrow("SELECT count(*) AS n FROM domains WHERE tenant_id = %s", (tenant_id,))
    return row["n"]


async def claim_of(txn: Transaction, name: str) -> dict | None:
    """The row that holds ``name`` (locked): its id, tenant, status and creation time."""
    return await txn.fetchone(
        "SELECT id, tenant_id, status, created_at FROM domains WHERE name = %s FOR UPDATE", (name,))


async def insert_domain(
    txn: Transaction, domain_id: uuid.UUID, tenant_id: uuid.UUID, name: str, return_path: str,
    tls: str, region: str, now: datetime,
) -> dict:
    try:
        return await txn.fetchrow(
            "INSERT INTO domains (id, tenant_id, name, status, return_path, tls, region, created_at,"
            " updated_at) VALUES (%s, %s, %s, 'not_started', %s, %s, %s, %s, %s)"
            f" RETURNING {_COLUMNS}",
            (domain_id, tenant_id, name, return_path, tls, region, now, now),
        )
    except pgerrors.UniqueViolation:  # another account added the name at the same moment
        raise Taken("name") from None


async def insert_key(
    txn: Transaction, key_id: uuid.UUID, domain_id: uuid.UUID, selector: str, algorithm: str,
    public_key: str, sealed: bytes, now: datetime,
) -> dict:
    return await txn.fetchrow(
        "INSERT INTO dkim_keys (id, domain_id, selector, algorithm, public_key, private_key,"
        f" created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_KEY_COLUMNS}",
        (key_id, domain_id, selector, algorithm, public_key, sealed, now),
    )


async def get_domain(db: Database | Transaction, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = %s AND id = %s", (tenant_id, domain_id)
    )


async def keys_of(db: Database | Transaction, domain_id: uuid.UUID) -> list[dict]:
    return await db.fetchall(
        f"SELECT {_KEY_COLUMNS} FROM dkim_keys WHERE domain_id = %s ORDER BY id", (domain_id,)
    )


async def list_domains(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = %s AND {where} {order}",
        [tenant_id, *params],
    )
    return page.finish(rows)


async def update_domain(
    db: Database, tenant_id: uuid.UUID, domain_id: uuid.UUID, changes: dict, now: datetime
) -> dict | None:
    assignments = "".join(f"{column} = %s, " for column in changes)
    return await db.fetchone(
        f"UPDATE domains SET {assignments}updated_at = %s WHERE tenant_id = %s AND id = %s"
        f" RETURNING {_COLUMNS}",
        [*changes.values(), now, tenant_id, domain_id],
    )


async def delete_domain(txn: Transaction, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> dict | None:
    """Deletes the domain, its DKIM keys and the API keys restricted to it (cascades)."""
    return await txn.fetchone(
        "DELETE FROM domains WHERE tenant_id = %s AND id = %s RETURNING id, name", (tenant_id, domain_id)
    )


async def lock_domain(txn: Transaction, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> dict | None:
    return await txn.fetchone(
        f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = %s AND id = %s FOR UPDATE",
        (tenant_id, domain_id),
    )


async def plan_check(
    txn: Transaction, domain_id: uuid.UUID, status: str, now: datetime, new_window: bool
) -> dict:
    """Check now; a check under way for the domain loses its claim (its result is dropped)."""
    return await txn.fetchrow(
        "UPDATE domains SET status = %(status)s, next_check_at = %(now)s, claim = NULL,"
        " claimed_until = NULL, updated_at = %(now)s,"
        " window_started = CASE WHEN %(new_window)s THEN %(now)s ELSE window_started END,"
        " checks = CASE WHEN %(new_window)s THEN 0 ELSE checks END"
        f" WHERE id = %(id)s RETURNING {_COLUMNS}",
        {"status": status, "now": now, "new_window": new_window, "id": domain_id},
    )


async def claim_due(db: Database, now: datetime, until: datetime, claim: uuid.UUID, limit: int) -> list[dict]:
    """Domains whose check is due, claimed for this node until ``until``: no other node gets them."""
    columns = ", ".join("d." + c.strip() for c in _COLUMNS.split(","))
    return await db.fetchall(
        "UPDATE domains d SET claimed_until = %(until)s, claim = %(claim)s"
        " FROM (SELECT id FROM domains WHERE next_check_at <= %(now)s"
        "       AND (claimed_until IS NULL OR claimed_until <= %(now)s)"
        "       ORDER BY next_check_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due"
        f" WHERE d.id = due.id RETURNING {columns}",
        {"now": now, "until": until, "claim": claim, "limit": limit},
        desc="claim_domain_checks",
    )


async def lock_claimed(txn: Transaction, domain_id: uuid.UUID, claim: uuid.UUID) -> dict | None:
    """The domain if this claim still holds it (not deleted, no newer check requested)."""
    return await txn.fetchone(
        f"SELECT {_COLUMNS} FROM domains WHERE id = %s AND claim = %s FOR UPDATE", (domain_id, claim)
    )


async def record_check(
    txn: Transaction, domain_id: uuid.UUID, status: str, record_status: dict[str, str],
    next_check_at: datetime | None, suspect_since: datetime | None, checks: int, now: datetime,
) -> None:
    await txn.execute(
        "UPDATE domains SET updated_at = CASE WHEN status = %(status)s THEN updated_at ELSE %(now)s END,"
        " status = %(status)s, record_status = %(records)s, next_check_at = %(next)s,"
        " suspect_since = %(suspect)s, checks = %(checks)s, last_checked_at = %(now)s,"
        " claim = NULL, claimed_until = NULL WHERE id = %(id)s",
        {"status": status, "records": Json(record_status), "next": next_check_at,
         "suspect": suspect_since, "checks": checks, "now": now, "id": domain_id},
    )


async def signing_keys(db: Database, tenant_id: uuid.UUID, name: str) -> list[dict]:
    """The domain named ``name`` of the tenant, one row per DKIM key, private keys sealed."""
    return await db.fetchall(
        "SELECT d.id, d.name, d.status, d.tls, d.return_path, k.id AS key_id, k.selector,"
        " k.algorithm, k.private_key FROM domains d JOIN dkim_keys k ON k.domain_id = d.id"
        " WHERE d.tenant_id = %s AND d.name = %s ORDER BY k.id",
        (tenant_id, name),
        desc="sending_domain",
    )


async def take_setup(txn: Transaction, tenant_id: uuid.UUID, now: float, limit: int, period: float) -> float | None:
    """Count one DNS set-up; None if it is allowed, else the seconds until one is."""
    await txn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('dns_setup:' || %s::text, 0))", (tenant_id,)
    )
    await txn.execute(
        "DELETE FROM dns_setups WHERE tenant_id = %s AND at <= %s", (tenant_id, now - period)
    )
    row: dict[str, Any] = await txn.fetchrow(
        "SELECT count(*) AS n, min(at) AS oldest FROM dns_setups WHERE tenant_id = %s", (tenant_id,)
    )
    if row["n"] >= limit:
        return row["oldest"] + period - now
    await txn.execute("INSERT INTO dns_setups (tenant_id, at) VALUES (%s, %s)", (tenant_id, now))
    return None
