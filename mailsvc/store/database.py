"""
The one door to PostgreSQL: named transactions with after-commit hooks over a txpostgres pool
whose connections come back by themselves after the server went away or stopped answering.

Each connection (``mailsvc.store.connection``) carries TCP keepalives, a server-side
``statement_timeout`` and a client-side deadline a little longer on every statement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.extras
from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from txpostgres import reconnection, txpostgres

from mailsvc.store.connection import (
    DEADLINE_GRACE,
    Connection,
    Cursor,
    DatabaseUnavailable,
    NotSent,
    QueryTimedOut,
    connection_dsn,
    connection_lost,
)

psycopg2.extras.register_uuid()
# timestamptz comes back as an aware datetime; jsonb as Python values.

log = Logger()

#: SQLSTATEs after which the whole transaction may simply run again.
_RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.DeadlockDetected)
_ATTEMPTS = 5
#: What the store's callers import from here too.
__all__ = ["DEADLINE_GRACE", "Database", "DatabaseUnavailable", "QueryTimedOut", "Transaction", "connection_dsn"]

class _Pool(txpostgres.ConnectionPool):
    """A txpostgres pool of ``Connection`` on an injected reactor, counting its own calls."""

    def __init__(self, reactor: IReactorTime, clock: IReactorTime, dsn: str, size: int,
                 statement_timeout: float) -> None:
        self.reactor = reactor
        self._clock = clock
        self._statement_timeout = statement_timeout
        self.size = size
        #: Calls made and not yet finished: the first ``size`` hold a connection, the rest wait.
        self.calls = 0
        super().__init__(None, dsn, min=size, cursor_factory=psycopg2.extras.RealDictCursor)
        # txpostgres' set holds only the idle connections.
        self._every = list(self.connections)
        #: A statement missed its deadline and no connection has come back since.
        self.silent = False
        for connection in self._every:
            connection.detector.addRecoveryHandler(self._answered)

    def connectionFactory(self, reactor: IReactorTime, cooperator: Any) -> Connection:  # noqa: N802 (txpostgres' name)
        return Connection(reactor, self._clock, self._statement_timeout, cooperator, self._deadline_missed)

    def runQuery(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._counted(super().runQuery(*args, **kwargs))

    def runOperation(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._counted(super().runOperation(*args, **kwargs))

    def runInteraction(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._counted(super().runInteraction(*args, **kwargs))

    def _counted(self, call: defer.Deferred[Any]) -> defer.Deferred[Any]:
        self.calls += 1  # undone at once if ``call`` has already finished

        def finished(result: object) -> object:
            self.calls -= 1
            return result

        return call.addBoth(finished)

    def _deadline_missed(self) -> None:
        """
        After one connection missed a deadline, the idle ones (txpostgres' set holds only those)
        are dropped too: the server is most likely silent on all of them, and the statements
        queued behind would otherwise meet that silence one connection after another, a deadline
        each. Those in use miss their own deadline; a healthy server reconnects them at once.
        """
        self.silent = True
        for connection in list(self.connections):
            connection.drop()

    def _answered(self) -> None:
        self.silent = False

    def close(self) -> None:
        for connection in self._every:
            connection.close_for_good()


class Transaction:
    """What a named transaction's body sees: statements, and hooks that run after COMMIT."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor
        self._after_commit: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._notifications: dict[tuple[str, str], None] = {}
        #: The body has returned: what is left is COMMIT.
        self.committing = False

    async def execute(self, sql: str, args: Any = None) -> int:
        """Run a statement; returns the row count."""
        await self._cursor.execute(sql, args)
        return self._cursor.rowcount

    async def fetchall(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        await self._cursor.execute(sql, args)
        return _rows(self._cursor)

    async def fetchone(self, sql: str, args: Any = None) -> dict[str, Any] | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    async def fetchrow(self, sql: str, args: Any = None) -> dict[str, Any]:
        """The row a statement always returns (an aggregate, an INSERT's RETURNING)."""
        return _the_row(await self.fetchall(sql, args), sql)

    async def lift_deadlines(self) -> None:
        """For statements that may rightly run long (migrations, which also wait for another
        node's): no ``statement_timeout`` and no client deadline for the rest of the transaction."""
        await self._cursor.execute("SET LOCAL statement_timeout = 0")
        self._cursor.deadline = None

    def mogrify(self, sql: str, args: Any) -> str:
        return self._cursor.mogrify(sql, args).decode("utf-8")

    def after_commit(self, fn: Callable[..., Any], *args: Any) -> None:
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


def _the_row(rows: list[dict[str, Any]], sql: str) -> dict[str, Any]:
    if not rows:
        raise LookupError(f"no row from a statement that always returns one: {sql[:80]}")
    return rows[0]


def _rows(cursor: Cursor) -> list[dict[str, Any]]:
    if cursor.description is None:
        return []
    return [dict(row) for row in cursor.fetchall()]


class Database:
    """
    PostgreSQL behind one type.

    ``run(desc, fn)`` runs ``await fn(txn, ...)`` inside BEGIN/COMMIT, retries it on
    serialization failures and deadlocks, and runs the transaction's after-commit hooks.
    ``desc`` names the transaction in logs.

    ``statement_timeout`` (seconds, 0: none) bounds every statement on the server, and that
    plus ``DEADLINE_GRACE`` on the client (``QueryTimedOut``), measured on ``clock`` (the
    reactor unless a test gives a ``Clock``).
    """

    def __init__(self, reactor: IReactorTime, dsn: str, pool_size: int = 8, statement_timeout: float = 15,
                 clock: IReactorTime | None = None) -> None:
        self._reactor = reactor
        self._clock = clock or reactor
        self._dsn = dsn
        self._pool_size = pool_size
        self._statement_timeout = statement_timeout
        self._started: _Pool | None = None

    @property
    def dsn(self) -> str:
        return self._dsn

    @property
    def _pool(self) -> _Pool:
        if self._started is None:
            raise DatabaseUnavailable("the database is not started")
        return self._started

    async def start(self) -> None:
        pool = self._started = _Pool(self._reactor, self._clock, self._dsn, self._pool_size, self._statement_timeout)
        try:
            await pool.start()
        except Exception as e:
            cause: BaseException | None = e.subFailure.value if isinstance(e, defer.FirstError) else e
            pool.close()
            self._started = None
            reason = str(cause).strip().splitlines()
            raise DatabaseUnavailable(
                "database unreachable: " + (reason[0] if reason else type(cause).__name__)
            ) from None

    def stop(self) -> None:
        if self._started is not None:
            self._started.close()
            self._started = None

    def pool_use(self) -> tuple[int, int, int]:
        """The pool's size, connections in use and callers waiting for one."""
        if self._started is None:
            return self._pool_size, 0, 0
        calls = self._started.calls
        return self._pool_size, min(calls, self._pool_size), max(0, calls - self._pool_size)

    async def run(self, desc: str, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        holder: list[Transaction] = []

        async def body(txn: Transaction) -> Any:
            result = await fn(txn, *args, **kwargs)
            await txn._send_notifications()
            txn.committing = True
            return result

        def interaction(cursor: Cursor) -> defer.Deferred[Any]:
            txn = Transaction(cursor)
            holder.append(txn)
            return defer.ensureDeferred(body(txn))

        def uncommitted() -> bool:
            return not holder or not holder[-1].committing

        def attempt_once() -> defer.Deferred[Any]:
            holder.clear()
            return self._pool.runInteraction(interaction)

        result = await self._retrying(desc, attempt_once, uncommitted)
        await self._after(desc, holder[-1])
        return result

    async def _retrying(self, desc: str, attempt_once: Callable[[], defer.Deferred[Any]],
                        uncommitted: Callable[[], bool] = lambda: False) -> Any:
        """
        ``attempt_once()``'s result, trying again when that cannot do twice what was meant once:

        - after a serialization failure or a deadlock (the server rolled the transaction back);
        - when nothing was sent (``ConnectionDead``: the connection was known dead, or found
          ended just before; ``NotSent``: psycopg2 refused the statement before sending it);
        - when the connection was lost (``connection_lost``) while ``uncommitted()`` holds: in
          a transaction whose body had not returned yet, so COMMIT was never sent and the server
          discarded the transaction with its session.

        A connection lost on COMMIT, or on an autocommit statement after it was sent, is raised as
        it is: the server may have committed it just before the connection went, so running it
        again could do it twice (one more message, one more charge). The caller hears of it.
        """
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return await attempt_once()
            except _RETRYABLE:
                if attempt == _ATTEMPTS:
                    raise
                log.info("transaction {desc} conflicted; retrying", desc=desc)
                continue
            except txpostgres.RollbackFailed as e:
                # The statement that failed says what happened; the rollback failed because of it.
                error = e.originalFailure.value
                if not (connection_lost(error) and uncommitted()):
                    e.originalFailure.raiseException()
            except (reconnection.ConnectionDead, NotSent):
                pass
            except psycopg2.Error as e:
                if not (connection_lost(e) and uncommitted()):
                    raise
            # Not while the server is silent: that takes seconds at least, and callers that
            # wait for one another (a shared lease, a group) would add up the retries.
            if self._pool.silent:
                raise DatabaseUnavailable(f"{desc}: database not answering") from None
            if attempt == _ATTEMPTS:
                raise DatabaseUnavailable(f"{desc}: database connection lost") from None
            log.info("transaction {desc} met a lost connection before anything was committed; retrying",
                     desc=desc)
            await task.deferLater(self._reactor, 0.2 * attempt, lambda: None)
        raise AssertionError("unreachable")

    async def _after(self, desc: str, txn: Transaction) -> None:
        for fn, args in txn._after_commit:
            try:
                await defer.maybeDeferred(fn, *args)
            except Exception:
                log.failure("after-commit hook of {desc} failed", desc=desc)

    async def fetchall(self, sql: str, args: Any = None, desc: str = "query") -> list[dict[str, Any]]:
        """One statement in autocommit mode (no BEGIN/COMMIT round trips)."""
        rows = await self._retrying(desc, lambda: self._pool.runQuery(sql, args))
        return [dict(row) for row in rows]

    async def fetchone(self, sql: str, args: Any = None, desc: str = "query") -> dict[str, Any] | None:
        rows = await self.fetchall(sql, args, desc)
        return rows[0] if rows else None

    async def fetchrow(self, sql: str, args: Any = None, desc: str = "query") -> dict[str, Any]:
        """The row a statement always returns (an aggregate, an INSERT's RETURNING)."""
        return _the_row(await self.fetchall(sql, args, desc), sql)

    async def execute(self, sql: str, args: Any = None, desc: str = "statement") -> None:
        """One statement in autocommit mode whose result is not needed."""
        await self._retrying(desc, lambda: self._pool.runOperation(sql, args))

    def listener(self) -> Connection:
        """A dedicated connection for LISTEN, with the pool's settings and deadlines (harmless
        there: LISTEN is instant, and time spent idle is no statement); it reconnects, and the
        caller re-LISTENs (``detector.addRecoveryHandler``) and stops it with ``close_for_good``."""
        return Connection(self._reactor, self._clock, self._statement_timeout)
