"""
Rows of two-factor sign-in and of one's sessions, for either kind of person who signs in (the
dashboard's users, the console's operators: ``Tables`` names their tables).
"""

from __future__ import annotations

import uuid
from datetime import datetime

import attrs

from mailsvc.store.database import Database, Transaction


@attrs.frozen
class Tables:
    """One kind of person: its table, its sessions' table and the column naming the person there."""

    people: str
    sessions: str
    person: str


USERS = Tables("users", "sessions", "user_id")
OPERATORS = Tables("operators", "operator_sessions", "operator_id")


async def state(db: Database | Transaction, t: Tables, person_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        "SELECT id, email, password_hash, password_version, totp_secret, totp_pending, totp_enabled_at,"
        " totp_last_step, coalesce(cardinality(recovery_codes), 0) AS recovery_left"
        f" FROM {t.people} WHERE id = %s", (person_id,),
    )


async def set_pending(db: Database, t: Tables, person_id: uuid.UUID, sealed: bytes) -> bool:
    """Keep an enrolment's secret until it is confirmed; False when the person has a second factor already."""
    row = await db.fetchone(
        f"UPDATE {t.people} SET totp_pending = %s WHERE id = %s AND totp_secret IS NULL RETURNING id",
        (sealed, person_id),
    )
    return row is not None


async def enable(db: Database, t: Tables, person_id: uuid.UUID, pending: bytes, step: int,
                 digests: list[bytes], now: datetime) -> bool:
    """The pending secret becomes the second factor, if it is still the one checked."""
    row = await db.fetchone(
        f"UPDATE {t.people} SET totp_secret = totp_pending, totp_pending = NULL, totp_enabled_at = %s,"
        " totp_last_step = %s, recovery_codes = %s"
        " WHERE id = %s AND totp_secret IS NULL AND totp_pending = %s RETURNING id",
        (now, step, digests, person_id, pending),
    )
    return row is not None


async def disable(db: Database | Transaction, t: Tables, person_id: uuid.UUID) -> None:
    await db.execute(
        f"UPDATE {t.people} SET totp_secret = NULL, totp_pending = NULL, totp_enabled_at = NULL,"
        " totp_last_step = NULL, recovery_codes = NULL WHERE id = %s", (person_id,),
    )


async def use_step(db: Database, t: Tables, person_id: uuid.UUID, step: int) -> bool:
    """Record that a code of ``step`` was used: False when that step, or a later one, was used already."""
    row = await db.fetchone(
        f"UPDATE {t.people} SET totp_last_step = %s WHERE id = %s AND totp_secret IS NOT NULL"
        " AND (totp_last_step IS NULL OR totp_last_step < %s) RETURNING id",
        (step, person_id, step),
    )
    return row is not None


async def use_recovery_code(db: Database, t: Tables, person_id: uuid.UUID, digest: bytes) -> int | None:
    """Strike out one unused recovery code: the number left, or None when it is not one of them."""
    row = await db.fetchone(
        f"UPDATE {t.people} SET recovery_codes = array_remove(recovery_codes, %s)"
        " WHERE id = %s AND totp_secret IS NOT NULL AND %s = ANY (recovery_codes)"
        " RETURNING cardinality(recovery_codes) AS n",
        (digest, person_id, digest),
    )
    return int(row["n"]) if row is not None else None


# One's sessions


async def sessions_of(db: Database, t: Tables, person_id: uuid.UUID, now: datetime,
                      idle_since: datetime) -> list[dict]:
    """The live sessions of a person (neither revoked, expired nor idle), newest first."""
    extra = ", user_agent, client" if t.sessions == "sessions" else ", NULL AS user_agent, NULL AS client"
    return await db.fetchall(
        f"SELECT id, created_at, last_seen_at, expires_at{extra} FROM {t.sessions}"
        f" WHERE {t.person} = %s AND revoked_at IS NULL AND expires_at > %s AND last_seen_at > %s"
        " ORDER BY id DESC LIMIT 200",
        (person_id, now, idle_since), desc="sessions of",
    )


async def revoke(db: Database, t: Tables, person_id: uuid.UUID, session_id: uuid.UUID, now: datetime) -> bool:
    row = await db.fetchone(
        f"UPDATE {t.sessions} SET revoked_at = %s WHERE id = %s AND {t.person} = %s AND revoked_at IS NULL"
        " RETURNING id", (now, session_id, person_id),
    )
    return row is not None


async def revoke_others(db: Database, t: Tables, person_id: uuid.UUID, keep: uuid.UUID, now: datetime) -> int:
    """Revoke every session of the person but ``keep``: how many."""
    rows = await db.fetchall(
        f"UPDATE {t.sessions} SET revoked_at = %s WHERE {t.person} = %s AND id <> %s AND revoked_at IS NULL"
        " RETURNING id", (now, person_id, keep),
    )
    return len(rows)


# An account's rule


async def require(db: Database, tenant_id: uuid.UUID, required: bool) -> None:
    await db.execute("UPDATE tenants SET require_two_factor = %s WHERE id = %s", (required, tenant_id))


async def required(db: Database, tenant_id: uuid.UUID) -> bool:
    row = await db.fetchone("SELECT require_two_factor FROM tenants WHERE id = %s", (tenant_id,))
    return bool(row and row["require_two_factor"])


async def revoke_tenant_sessions(txn: Transaction | Database, tenant_id: uuid.UUID, now: datetime) -> None:
    """End every session of every user of the account (it is suspended)."""
    await txn.execute("UPDATE sessions SET revoked_at = %s WHERE tenant_id = %s AND revoked_at IS NULL",
                      (now, tenant_id))
