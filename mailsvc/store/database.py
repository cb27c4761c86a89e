"""
The one door to PostgreSQL: named transactions with after-commit hooks over a txpostgres pool
whose connections come back by themselves after the server went away.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extras
from twisted.internet import defer, task
from twisted.logger import Logger
from txpostgres import reconnection, txpostgres

psycopg2.extras.register_uuid()
# timestamptz comes back as an aware datetime; jsonb as Python values.

log = Logger()

#: SQLSTATEs after which the whole transaction may simply run again.
_RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.DeadlockDetected)
_ATTEMPTS = 5


class DatabaseUnavailable(Exception):
    """The database could not be reached (at start, or after repeated reconnection)."""


class _Pool(txpostgres.ConnectionPool):
    """A txpostgres pool on an injected reactor whose connections reconnect on their own."""

    def __init__(self, reactor, dsn: str, size: int):
        self.reactor = reactor
        super().__init__(None, dsn, min=size, cursor_factory=psycopg2.extras.RealDictCursor)

    def connectionFactory(self, reactor, cooperator):  # noqa: N802 (txpostgres' name)
        detector = reconnection.DeadConnectionDetector(reactor=reactor)
        return txpostgres.Connection(reactor, cooperator, detector=detector)


class Transaction:
    """What a named transaction's body sees: statements, and hooks that run after COMMIT."""

    def __init__(self, cursor):
        self._cursor = cursor
        self._after_commit: list[tuple[Callable, tuple]] = []
        self._notifications: dict[tuple[str, str], None] = {}

    async def execute(self, sql: str, args: Any = None) -> int:
        """Run a statement; returns the row count."""
        await self._cursor.execute(sql, args)
        return self._cursor.rowcount

    async def fetchall(self, sql: str, args: Any = None) -> list[dict]:
        await self._cursor.execute(sql, args)
        return _rows(self._cursor)

    async def fetchone(self, sql: str, args: Any = None) -> dict | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    def mogrify(self, sql: str, args: Any) -> str:
        return self._cursor.mogrify(sql, args).decode("utf-8")

    def after_commit(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` once the transaction has committed (never if it rolls back)."""
        self._after_commit.append((fn, args))

    def notify(self, channel: str, payload: str = "") -> None:
        """NOTIFY ``channel``; PostgreSQL delivers it at COMMIT (never if the transaction rolls
        back), so listeners never see uncommitted rows. Repeats are sent once."""
        self._notifications.setdefault((channel, payload), None)

    async def _send_notifications(self) -> None:
        """One statement for every NOTIFY of the transaction, issued just before COMMIT."""
        if self._notifications:
            pairs = list(self._notifications)
            calls = ", ".join("pg_notify(%s, %s)" for _ in pairs)
            await self._cursor.execute(f"SELECT {calls}", [value for pair in pairs for value in pair])


def _rows(cursor) -> list[dict]:
    if cursor.description is None:
        return []
    return [dict(row) for row in cursor.fetchall()]


class Database:
    """
    PostgreSQL behind one type.

    ``run(desc, fn)`` runs ``await fn(txn, ...)`` inside BEGIN/COMMIT, retries it on
    serialization failures and deadlocks, and runs the transaction's after-commit hooks.
    ``desc`` names the transaction in logs.
    """

    def __init__(self, reactor, dsn: str, pool_size: int = 8):
        self._reactor = reactor
        self._dsn = dsn
        self._pool_size = pool_size
        self._pool: _Pool | None = None

    @property
    def dsn(self) -> str:
        return self._dsn

    async def start(self) -> None:
        self._pool = _Pool(self._reactor, self._dsn, self._pool_size)
        try:
            await self._pool.start()
        except Exception as e:
            if isinstance(e, defer.FirstError):
                e = e.subFailure.value
            for connection in self._pool.connections:
                if connection._connection is not None:
                    connection.close()
            self._pool = None
            reason = str(e).strip().splitlines()
            raise DatabaseUnavailable(
                "database unreachable: " + (reason[0] if reason else type(e).__name__)
            ) from None

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def run(self, desc: str, fn: Callable[..., Awaitable[Any]], *args, **kwargs) -> Any:
        holder: list[Transaction] = []

        async def body(txn: Transaction):
            result = await fn(txn, *args, **kwargs)
            await txn._send_notifications()
            return result

        def interaction(cursor):
            txn = Transaction(cursor)
            holder.append(txn)
            return defer.ensureDeferred(body(txn))

        result = await self._retrying(desc, lambda: self._pool.runInteraction(interaction))
        await self._after(desc, holder[-1])
        return result

    async def _retrying(self, desc: str, attempt_once: Callable[[], defer.Deferred]) -> Any:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return await attempt_once()
            except _RETRYABLE:
                if attempt == _ATTEMPTS:
                    raise
                log.info("transaction {desc} conflicted; retrying", desc=desc)
            except reconnection.ConnectionDead:
                # The connection was already known dead before anything was sent, so the
                # statement never ran: it is safe to try again once the connection is back.
                if attempt == _ATTEMPTS:
                    raise DatabaseUnavailable(f"{desc}: database connection lost") from None
                await task.deferLater(self._reactor, 0.2 * attempt, lambda: None)
        raise AssertionError("unreachable")

    async def _after(self, desc: str, txn: Transaction) -> None:
        for fn, args in txn._after_commit:
            try:
                await defer.maybeDeferred(fn, *args)
            except Exception:
                log.failure("after-commit hook of {desc} failed", desc=desc)

    async def fetchall(self, sql: str, args: Any = None, desc: str = "query") -> list[dict]:
        """One statement in autocommit mode (no BEGIN/COMMIT round trips)."""
        rows = await self._retrying(desc, lambda: self._pool.runQuery(sql, args))
        return [dict(row) for row in rows]

    async def fetchone(self, sql: str, args: Any = None, desc: str = "query") -> dict | None:
        rows = await self.fetchall(sql, args, desc)
        return rows[0] if rows else None

    async def execute(self, sql: str, args: Any = None, desc: str = "statement") -> None:
        """One statement in autocommit mode whose result is not needed."""
        await self._retrying(desc, lambda: self._pool.runOperation(sql, args))

    def listener(self) -> txpostgres.Connection:
        """A dedicated connection for LISTEN; reconnects, and the caller re-LISTENs."""
        detector = reconnection.DeadConnectionDetector(reactor=self._reactor)
        return txpostgres.Connection(self._reactor, detector=detector)
