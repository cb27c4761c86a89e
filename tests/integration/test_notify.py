"""LISTEN/NOTIFY wake-ups on the node's dedicated connection."""

import os
import signal

import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor
from twisted.internet.task import Clock

from mailsvc.store.database import Database, QueryTimedOut
from mailsvc.store.notify import Notifications
from tests.helpers.polling import async_until


@pt.ensureDeferred
async def test_callbacks_per_channel(db):
    notifications = Notifications(db)
    alpha, beta = [], []
    try:
        await defer.gatherResults([
            defer.ensureDeferred(notifications.listen("alpha", alpha.append)),
            defer.ensureDeferred(notifications.listen("beta", beta.append)),
            defer.ensureDeferred(notifications.listen("alpha", lambda payload: alpha.append("again:" + payload))),
        ])
        await db.execute("SELECT pg_notify('alpha', 'one')")
        await async_until(lambda: len(alpha) == 2, 10, "two notifications on alpha")
        assert sorted(alpha) == ["again:one", "one"] and beta == []

        async def commits(txn, fail):
            txn.notify("beta", "after commit")
            if fail:
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await db.run("rolled back", commits, True)
        await db.run("committed", commits, False)
        await async_until(lambda: beta, 10, "a notification on beta")
        assert beta == ["after commit"]
    finally:
        notifications.stop()
    with pytest.raises(ValueError):
        await notifications.listen("not a channel; DROP TABLE events", alpha.append)


@pt.ensureDeferred
async def test_listen_is_issued_again_after_the_connection_comes_back(db):
    notifications = Notifications(db)
    woken = []
    try:
        await notifications.listen("events", woken.append)
        await db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN%%'"
        )
        # Notifications sent while it was down are lost: every listener is woken on recovery.
        await async_until(lambda: woken == [""], 10, "every listener woken on recovery")
        await db.execute("SELECT pg_notify('events', 'after')")
        await async_until(lambda: woken == ["", "after"], 10, "the notification after the reconnection")
    finally:
        notifications.stop()


@pt.ensureDeferred
async def test_listen_is_issued_again_after_a_missed_deadline(db, fresh_dsn):
    clock = Clock()
    listening_db = Database(reactor, fresh_dsn, 1, statement_timeout=1, clock=clock)
    notifications = Notifications(listening_db)
    first, second = [], []
    try:
        await notifications.listen("first", first.append)
        (listener,) = await db.fetchall(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%%'")
        os.kill(listener["pid"], signal.SIGSTOP)
        try:
            listening = defer.ensureDeferred(notifications.listen("second", second.append))
            clock.advance(6)
            assert listening.called
            with pytest.raises(QueryTimedOut):
                await listening
            # Reconnected at once (the postmaster runs): both channels LISTENed again, both woken.
            await async_until(lambda: first == [""] and second == [""], 10, "both listeners' wake-ups")
        finally:
            os.kill(listener["pid"], signal.SIGCONT)
        await db.execute("SELECT pg_notify('first', 'one'), pg_notify('second', 'two')")
        await async_until(lambda: first == ["", "one"] and second == ["", "two"], 10,
                          "each listener's notification")
    finally:
        notifications.stop()
