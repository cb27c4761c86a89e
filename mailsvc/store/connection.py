"""
One PostgreSQL connection of the store, over txpostgres: keepalives, a server-side
``statement_timeout`` and a client-side deadline a little longer on every statement, and
reconnection with backoff after an error or a missed deadline (``mailsvc.store.database`` pools
them). A server that does not answer at all (stopped, or its host gone and nothing tells the
socket) fails the statement with ``QueryTimedOut``, and the connection is dropped and replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.extensions
from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from txpostgres import reconnection, txpostgres

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


class NotSent(Exception):
    """psycopg2 refused a statement before any of it reached the server (its connection is gone)."""


def connection_lost(error: BaseException | None) -> bool:
    """
    Whether ``error`` says the connection itself is gone: a client-side error ("connection
    already closed"), or an error of the connection-exception (08) or operator-intervention (57P)
    classes, or one without a SQLSTATE ("server closed the connection unexpectedly"). The
    server's answers to a statement (a serialization failure, a cancelled statement) are not.
    """
    if isinstance(error, psycopg2.InterfaceError | NotSent):
        return True
    if isinstance(error, psycopg2.OperationalError):
        code = error.pgcode
        return code is None or code.startswith(("08", "57P"))
    return False


def _is_dead(failure: Failure) -> bool:
    """
    Whether a failure means the connection cannot serve another statement: a missed deadline,
    a failed rollback, or a lost connection (``connection_lost``).
    """
    if failure.check(QueryTimedOut, txpostgres.RollbackFailed):
        return True
    return connection_lost(failure.value)


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


class Cursor(txpostgres.Cursor):
    """A cursor whose every statement has its connection's deadline (None: no deadline)."""

    def __init__(self, cursor: Any, connection: Connection) -> None:
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
    """A statement's failure to be sent, as ``NotSent`` when the connection is what failed."""
    if connection_lost(failure.value):
        return Failure(NotSent(str(failure.value).strip() or type(failure.value).__name__))
    return failure


class Connection(txpostgres.Connection):
    """
    A txpostgres connection with keepalives, ``statement_timeout`` and deadlines on connecting
    and on every statement; it reconnects by itself after an error or a missed deadline.
    """

    cursorFactory = Cursor  # noqa: N815 (txpostgres' name)

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
            if not connection_lost(e):
                raise
            ended = True
        if not ended:
            return None
        self.detector.checkForDeadConnection(Failure(NotSent("the server ended the session")))
        return defer.fail(reconnection.ConnectionDead())
