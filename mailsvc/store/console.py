"""Rows of the operator console: operators' accounts and their sessions."""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.store.database import Database, Transaction

_COLUMNS = ("id, email, name, password_hash, password_version, created_at, updated_at,"
            " totp_enabled_at IS NOT NULL AS two_factor")


async def insert_operator(db: Database | Transaction, operator_id: uuid.UUID, email: str, name: str,
                          now: datetime) -> dict | None:
    """The new operator's row; None when the address has one."""
    return await db.fetchone(
        "INSERT INTO operators (id, email, name, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
        f" ON CONFLICT (email) DO NOTHING RETURNING {_COLUMNS}",
        (operator_id, email, name, now, now),
    )


async def operator_by_email(db: Database, email: str) -> dict | None:
    return await db.fetchone(f"SELECT {_COLUMNS} FROM operators WHERE email = %s", (email,), desc="operator")


async def operator_by_id(db: Database, operator_id: uuid.UUID) -> dict | None:
    return await db.fetchone(f"SELECT {_COLUMNS} FROM operators WHERE id = %s", (operator_id,), desc="operator")


async def set_password(txn: Transaction, operator_id: uuid.UUID, version: int, password_hash: str,
                       now: datetime) -> dict | None:
    """Set the password if it is still at ``version`` (a link is used once); None otherwise."""
    return await txn.fetchone(
        "UPDATE operators SET password_hash = %s, password_version = password_version + 1, updated_at = %s"
        f" WHERE id = %s AND password_version = %s RETURNING {_COLUMNS}",
        (password_hash, now, operator_id, version),
    )


async def rehash(db: Database, operator_id: uuid.UUID, old_hash: str, new_hash: str) -> None:
    await db.execute("UPDATE operators SET password_hash = %s WHERE id = %s AND password_hash = %s",
                     (new_hash, operator_id, old_hash))


async def insert_session(db: Database, session_id: uuid.UUID, token_hash: bytes, operator: dict,
                         now: datetime, expires_at: datetime, user_agent: str | None = None,
                         client: str | None = None) -> None:
    """(Where a console session was opened is not kept.)"""
    await db.execute(
        "INSERT INTO operator_sessions (id, token_hash, operator_id, created_at, last_seen_at, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (session_id, token_hash, operator["id"], now, now, expires_at),
    )


async def live_session(db: Database, token_hash: bytes, now: datetime, idle_since: datetime) -> dict | None:
    """The session of a token that is neither revoked, past its expiry nor idle since before ``idle_since``."""
    return await db.fetchone(
        "SELECT s.id, s.operator_id, s.last_seen_at, o.email, o.name"
        " FROM operator_sessions s JOIN operators o ON o.id = s.operator_id"
        " WHERE s.token_hash = %s AND s.revoked_at IS NULL AND s.expires_at > %s AND s.last_seen_at > %s",
        (token_hash, now, idle_since), desc="operator session",
    )


async def touch_session(db: Database, session_id: uuid.UUID, now: datetime) -> None:
    await db.execute("UPDATE operator_sessions SET last_seen_at = %s WHERE id = %s AND revoked_at IS NULL",
                     (now, session_id))


async def revoke_session(db: Database, token_hash: bytes, now: datetime) -> None:
    await db.execute("UPDATE operator_sessions SET revoked_at = %s WHERE token_hash = %s AND revoked_at IS NULL",
                     (now, token_hash))


async def revoke_sessions_of(txn: Transaction, operator_id: uuid.UUID, now: datetime) -> None:
    await txn.execute("UPDATE operator_sessions SET revoked_at = %s WHERE operator_id = %s AND revoked_at IS NULL",
                      (now, operator_id))
