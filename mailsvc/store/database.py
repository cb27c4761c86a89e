"""
The one door to PostgreSQL: named transactions with after-commit hooks over a txpostgres pool
whose connections come back by themselves after the server went away or stopped answering.

Every connection carries TCP keepalives and a server-side ``statement_timeout``, and every
statement a client-side deadline a little longer: a server that does not answer at all (it is
stopped, or its host is gone and nothing tells the socket) fails the statement with
``QueryTimedOut``, and the connection is dropped and replaced with backoff.
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
from twisted.python.failure import Failure
from txpostgres import reconnection, txpostgres

psycopg2.extras.register_uuid()
# timestamptz comes back as an aware datetime; jsonb as Python values.

log = Logger()

#: SQLSTATEs after which the whole transaction may simply run again.
_RETRYABLE = (psycopg2.errors.SerializationFailure, psycopg2.errors.DeadlockDetected)
_ATTEMPTS = 5

#: TCP keepalives (a DSN may set its own): an idle connection whose peer vanished (host down,
#: a NAT or firewall forgot it) is noticed after 10 + 3 × 5 = 25 s. Unix sockets ignore them.
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3"}
#: How much longer than ``statement_timeout`` the client waits for an answer: the server's own
#: cancel (which leaves the connection usable) comes first whenever the server runs at all.
DEADLINE_GRACE = 5.0
#: A connection not established by then is closed and tried again later (libpq's
#: ``connect_timeout`` does not apply to the non-blocking connections txpostgres makes).
CONNECT_DEADLINE = 10.0


class DatabaseUnavailable(Exception):
    """The database could not be reached (at start, or after repeated reconnection)."""


class QueryTimedOut(DatabaseUnavailable):
    """PostgreSQL did not answer in time; the connection was dropped and is being replaced."""


def connection_dsn(dsn: str, statement_timeout: float) -> str:
    """``dsn`` with the keepalives (unless it sets them) and the ``statement_timeout``."""
    params = psycopg2.extensions.parse_dsn(dsn)
    for key, value in KEEPALIVES.items():
        params.setdefault(key, value)
    setting = f"-c statement_timeout={round(statement_timeout * 1000)}"
    params["options"] = f"{params.get('options', '')} {setting}".strip()
    return psycopg2.extensions.make_dsn(**params)


class _NotSent(Exception):
    """psycopg2 refused a statement before any of it reached the server (its connection is gone)."""


def _connection_lost(error: BaseException | None) -> bool:
    """
    Whether ``error`` says the connection itself is gone: a client-side error ("connection
    already closed"), or an error of the connection-exception (08) or operator-intervention (57P)
    classes, or one without a SQLSTATE ("server closed the connection unexpectedly"). The
    server's answers to a statement (a serialization failure, a cancelled statement) are not.
    """
    if isinstance(error, psycopg2.InterfaceError | _NotSent):
        return True
    if isinstance(error, psycopg2.OperationalError):
        code = error.pgcode
        return code is None or code.startswith(("08", "57P"))
    return False


def _is_dead(failure: Failure) -> bool:
    """
    Whether a failure means the connection cannot serve another statement: a missed deadline,
    a failed rollback, or a lost connection (``_connection_lost``).
    """
    if failure.check(QueryTimedOut, txpostgres.RollbackFailed):
        return True
    return _connection_lost(failure.value)


def _within(running: defer.Deferred[Any], seconds: float, clock: IReactorTime, give_up: Callable[[], None],
            what: str) -> defer.Deferred[Any]:
    """
    ``running``'s outcome, or ``QueryTimedOut`` after ``seconds`` once ``give_up()`` has closed
    the connection. ``running`` itself is never cancelled: txpostgres would call libpq's
    PQcancel, which blocks the reactor until the server answers, and a stopped one never does.
    """
    outcome: defer.Deferred[Any] = defer.Deferred(lambda _: give_up())

    def relay(result: object) -> None:
        if not outcome.called:
            if isinstance(result, Failure):
                outcome.errback(result)
            else:
                outcome.callback(result)
        # else: the caller was told of the deadline; the late outcome is the drop's echo.

    running.addBoth(relay)

    def timed_out(_result: object, _seconds: float) -> Failure:
        return Failure(QueryTimedOut(f"PostgreSQL did not answer {what} within {seconds:g} s"))

    return outcome.addTimeout(seconds, clock, onTimeoutCancel=timed_out)


class _Detector(reconnection.DeadConnectionDetector):
    """txpostgres' reconnection with backoff, on a missed deadline too, until the owner closes."""

    def __init__(self, reactor: IReactorTime) -> None:
        super().__init__(deathChecker=_is_dead, reactor=reactor)
        self.abandoned = False

    def reconnect(self) -> defer.Deferred[Any] | None:
        if self.abandoned:
            return None
        return super().reconnect()


class _Cursor(txpostgres.Cursor):
    """A cursor whose every statement has its connection's deadline (None: no deadline)."""

    def __init__(self, cursor: Any, connection: _Connection) -> None:
        super().__init__(cursor, connection)
        self._owner = connection
        self.deadline = connection.deadline

    def execute(self, query: str, params: Any = None) -> defer.Deferred[Any]:
        running = super().execute(query, params)
        if running.called:
            # Fired before any polling: psycopg2 raised while sending, so the server never got
            # the statement (txpostgres reports that at once, and only that).
            return running.addErrback(_unsent)
        if self.deadline is None:
            return running
        return _within(running, self.deadline, self._owner.clock, self._owner.missed_deadline, "a statement")

    def _handleCancellation(self, failure: Failure) -> Failure:  # noqa: N802 (txpostgres' name)
        # txpostgres reads QueryCanceled as its own cancel, never used here: it is the server's
        # statement_timeout (or an operator's pg_cancel_backend), and says so as it is.
        return failure


def _unsent(failure: Failure) -> Failure:
    """A statement's failure to be sent, as ``_NotSent`` when the connection is what failed."""
    if _connection_lost(failure.value):
        return Failure(_NotSent(str(failure.value).strip() or type(failure.value).__name__))
    return failure


class _Connection(txpostgres.Connection):
    """
    A txpostgres connection with keepalives, ``statement_timeout`` and deadlines on connecting
    and on every statement; it reconnects by itself after an error or a missed deadline.
    """

    cursorFactory = _Cursor  # noqa: N815 (txpostgres' name)

    def __init__(self, reactor: IReactorTime, clock: IReactorTime, statement_timeout: float,
                 cooperator: Any = None, on_missed_deadline: Callable[[], None] | None = None) -> None:
        super().__init__(reactor, cooperator, detector=_Detector(reactor))
        self._on_missed_deadline = on_missed_deadline
        #: What the deadlines are measured on.
        self.clock = clock
        self._statement_timeout = statement_timeout
        #: The client-side deadline of a statement (None: statement_timeout is off, so is this).
        self.deadline = statement_timeout + DEADLINE_GRACE if statement_timeout else None

    def connect(self, dsn: str, **kwargs: Any) -> defer.Deferred[Any]:
        connecting = super().connect(connection_dsn(dsn, self._statement_timeout), **kwargs)
        self.detector.setReconnectable(self, dsn, **kwargs)  # reconnect from the DSN as given
        return _within(connecting, CONNECT_DEADLINE, self.clock, self.close, "a connection")

    def drop(self) -> None:
        """Give the connection up as dead: close it and reconnect with backoff."""
        self.detector.checkForDeadConnection(Failure(QueryTimedOut("no answer within the deadline")))

    def missed_deadline(self) -> None:
        # The others first: dropping this one fails its statement, and what waited for that
        # runs at once and would take an idle connection not yet dropped.
        if self._on_missed_deadline is not None:
            self._on_missed_deadline()
        self.drop()

    def close_for_good(self) -> None:
        """Close the connection and stop any reconnection under way."""
        self.detector.abandoned = True
        if self.pollable() is not None:
            self.close()

    def runQuery(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._unless_ended() or super().runQuery(*args, **kwargs)

    def runOperation(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._unless_ended() or super().runOperation(*args, **kwargs)

    def runInteraction(self, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:  # noqa: N802 (txpostgres' name)
        return self._unless_ended() or super().runInteraction(*args, **kwargs)

    def _unless_ended(self) -> defer.Deferred[Any] | None:
        """
        ``ConnectionDead`` (nothing sent) when the server has already ended this idle session,
        else None. A backend that is terminated or shut down sends a FATAL message before it
        closes the socket; until the reactor reads that, the connection looks usable, and a
        statement sent on it would fail with no way to tell whether it ran. Reading what is
        waiting first (libpq keeps the unsolicited FATAL as a notice, or reports the closed
        socket) tells it before anything is sent, so the caller may safely try again.
        """
        pg = self.pollable()
        if pg is None or self.detector.connectionIsDead:
            return None  # not connected yet, or known dead: txpostgres fails it the same way
        try:
            if not pg.closed and not pg.isexecuting():
                pg.poll()
            # A FATAL message always ends its session (libpq writes its severity untranslated
            # only with lc_messages C, the embedded cluster's; otherwise the closed socket tells).
            ended = bool(pg.closed) or any(n.startswith("FATAL:") for n in pg.notices)
        except psycopg2.Error as e:
            if not _connection_lost(e):
                raise
            ended = True
        if not ended:
            return None
        self.detector.checkForDeadConnection(Failure(_NotSent("the server ended the session")))
        return defer.fail(reconnection.ConnectionDead())


class _Pool(txpostgres.ConnectionPool):
    """A txpostgres pool of ``_Connection`` on an injected reactor, counting its own calls."""

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

    def connectionFactory(self, reactor: IReactorTime, cooperator: Any) -> _Connection:  # noqa: N802 (txpostgres' name)
        return _Connection(reactor, self._clock, self._statement_timeout, cooperator, self._deadline_missed)

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

    def __init__(self, cursor: _Cursor) -> None:
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


def _rows(cursor: _Cursor) -> list[dict[str, Any]]:
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

        def interaction(cursor: _Cursor) -> defer.Deferred[Any]:
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
          ended just before; ``_NotSent``: psycopg2 refused the statement before sending it);
        - when the connection was lost (``_connection_lost``) while ``uncommitted()`` holds: in
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
                if not (_connection_lost(error) and uncommitted()):
                    e.originalFailure.raiseException()
            except (reconnection.ConnectionDead, _NotSent):
                pass
            except psycopg2.Error as e:
                if not (_connection_lost(e) and uncommitted()):
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

    def listener(self) -> _Connection:
        """A dedicated connection for LISTEN, with the pool's settings and deadlines (harmless
        there: LISTEN is instant, and time spent idle is no statement); it reconnects, and the
        caller re-LISTENs (``detector.addRecoveryHandler``) and stops it with ``close_for_good``."""
        return _Connection(self._reactor, self._clock, self._statement_timeout)
