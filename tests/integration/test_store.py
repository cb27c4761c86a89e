"""The Database type and migrations, on the real PostgreSQL."""

import os
import signal
import time
from contextlib import closing

import psycopg2
import pytest
import pytest_twisted as pt
from psycopg2.extensions import parse_dsn
from twisted.internet import defer, reactor, threads
from twisted.internet.task import Clock

from mailsvc.deferreds import when_done
from mailsvc.store.database import DEADLINE_GRACE, Database, DatabaseUnavailable, QueryTimedOut, connection_dsn
from mailsvc.store.migrate import SCHEMA_VERSION, migrate, migration_files
from tests.helpers.polling import async_until


def test_migration_files_are_numbered_without_gaps():
    versions = [v for v, _, _ in migration_files()]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


@pt.ensureDeferred
async def test_migrate_is_idempotent_and_recorded(db):
    assert await migrate(db) == []
    rows = await db.fetchall("SELECT version FROM schema_migrations ORDER BY version")
    assert [r["version"] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


@pt.ensureDeferred
async def test_concurrent_migrations_apply_once(pg_dsn):
    conn = psycopg2.connect(pg_dsn.replace("dbname=mailsvc", "dbname=postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS concurrent_migrate WITH (FORCE)")
        cur.execute("CREATE DATABASE concurrent_migrate")
    dsn = pg_dsn.replace("dbname=mailsvc", "dbname=concurrent_migrate")
    nodes = [Database(reactor, dsn, 1) for _ in range(3)]
    try:
        for node in nodes:
            await node.start()
        results = await defer.gatherResults([defer.ensureDeferred(migrate(n)) for n in nodes])
        assert sorted(len(r) for r in results) == [0, 0, SCHEMA_VERSION]
    finally:
        for node in nodes:
            node.stop()
        with conn.cursor() as cur:
            cur.execute("DROP DATABASE concurrent_migrate WITH (FORCE)")
        conn.close()


@pt.ensureDeferred
async def test_a_newer_schema_is_refused(db):
    from mailsvc.store.migrate import MigrationError

    await db.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'future')", (SCHEMA_VERSION + 1,))
    with pytest.raises(MigrationError, match="newer than this code"):
        await migrate(db)


@pt.ensureDeferred
async def test_after_commit_hooks_run_only_after_commit(db):
    seen = []

    async def ok(txn):
        await txn.execute("CREATE TABLE t (x int)")
        await txn.execute("INSERT INTO t VALUES (1)")
        txn.after_commit(seen.append, "committed")
        assert seen == []
        return "done"

    assert await db.run("ok", ok) == "done"
    assert seen == ["committed"]

    async def fails(txn):
        await txn.execute("INSERT INTO t VALUES (2)")
        txn.after_commit(seen.append, "never")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        await db.run("fails", fails)
    assert seen == ["committed"]
    assert [r["x"] for r in await db.fetchall("SELECT x FROM t")] == [1]


@pt.ensureDeferred
async def test_notify_is_sent_after_commit(db, fresh_dsn):
    listener = db.listener()
    await listener.connect(fresh_dsn)
    got = []
    listener.addNotifyObserver(lambda n: got.append((n.channel, n.payload)))
    await listener.runOperation("LISTEN wake")

    async def body(txn):
        txn.notify("wake", "hello")

    await db.run("notify", body)
    await async_until(lambda: got, 5, "the notification after the commit", interval=0.01)
    listener.close()
    assert got == [("wake", "hello")]


@pt.ensureDeferred
async def test_serialization_failures_are_retried(db):
    await db.execute("CREATE TABLE counter (n int)")
    await db.execute("INSERT INTO counter VALUES (0)")
    attempts = []
    read: list[int] = []
    all_read: defer.Deferred = defer.Deferred()

    async def bump(txn):
        attempts.append(1)
        await txn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        row = await txn.fetchone("SELECT n FROM counter")
        if len(attempts) <= 3:  # the first attempts all read before any of them writes
            read.append(row["n"])
            if len(read) == 3:
                all_read.callback(None)
            await when_done(all_read)
        await txn.execute("UPDATE counter SET n = %s", (row["n"] + 1,))

    await defer.gatherResults([defer.ensureDeferred(db.run("bump", bump)) for _ in range(3)])
    assert (await db.fetchone("SELECT n FROM counter"))["n"] == 3
    assert len(attempts) > 3


@pt.ensureDeferred
async def test_pool_recovers_after_its_connections_are_killed(db):
    killed = [row["pid"] for row in await db.fetchall(
        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )]
    assert killed

    def gone() -> bool:
        with closing(psycopg2.connect(db.dsn)) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (killed,))
            return cur.fetchone()[0] == 0

    await async_until(lambda: threads.deferToThread(gone), 10, "the killed backends gone")
    # The killed backends are noticed and reconnected; queries that meet a dead connection retry.
    results = await defer.gatherResults(
        [defer.ensureDeferred(db.fetchone("SELECT 1 AS one")) for _ in range(16)]
    )
    assert all(r["one"] == 1 for r in results)


def _terminate_and_wait(dsn: str, pid: int) -> None:
    """Ends backend ``pid`` and waits until it is gone, blocking: the reactor reads nothing meanwhile."""
    with closing(psycopg2.connect(dsn)) as conn, conn.cursor() as cur:
        conn.autocommit = True
        cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            if cur.fetchone()[0] == 0:
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} still there")


@pt.ensureDeferred
async def test_a_connection_killed_between_two_uses_serves_the_next_query_anew(fresh_dsn):
    db = Database(reactor, fresh_dsn, 1)
    await db.start()
    try:
        first = await db.fetchone("SELECT pg_backend_pid() AS pid")
        # Killed and gone before the reactor could read the server's goodbye: the pool's one
        # connection still looks usable when the next query takes it.
        _terminate_and_wait(fresh_dsn, first["pid"])
        second = await db.fetchone("SELECT pg_backend_pid() AS pid")
        assert second["pid"] != first["pid"]
        assert db.pool_use() == (1, 0, 0)
    finally:
        db.stop()


@pt.ensureDeferred
async def test_a_transaction_whose_connection_dies_before_commit_runs_again(fresh_dsn):
    db = Database(reactor, fresh_dsn, 1)
    await db.start()
    await db.execute("CREATE TABLE t (x int)")
    attempts = []

    async def body(txn):
        attempts.append((await txn.fetchone("SELECT pg_backend_pid() AS pid"))["pid"])
        await txn.execute("INSERT INTO t VALUES (%s)", (len(attempts),))
        if len(attempts) == 1:
            await threads.deferToThread(_terminate_and_wait, fresh_dsn, attempts[0])
            await txn.execute("INSERT INTO t VALUES (0)")  # sent on the dead connection
        return len(attempts)

    try:
        assert await db.run("twice", body) == 2
        assert attempts[0] != attempts[1]
        assert [r["x"] for r in await db.fetchall("SELECT x FROM t")] == [2]
    finally:
        db.stop()


@pt.ensureDeferred
async def test_the_pool_counts_its_connections_in_use_and_its_waiting_callers(fresh_dsn):
    db = Database(reactor, fresh_dsn, 2)
    await db.start()
    try:
        release: defer.Deferred = defer.Deferred()

        async def hold(txn):
            await when_done(release)

        holders = [defer.ensureDeferred(db.run("hold", hold)) for _ in range(3)]
        await async_until(lambda: db.pool_use()[1] == 2, 5, "two connections in use", interval=0.01)
        assert db.pool_use() == (2, 2, 1)
        release.callback(None)
        await defer.gatherResults(holders)
        assert db.pool_use() == (2, 0, 0)
    finally:
        db.stop()


@pytest.mark.parametrize(("dsn", "expected"), [
    ("host=/run/pg dbname=mail", {
        "host": "/run/pg", "dbname": "mail", "keepalives": "1", "keepalives_idle": "10",
        "keepalives_interval": "5", "keepalives_count": "3", "options": "-c statement_timeout=15000"}),
    # What the DSN sets is kept; its own options come first.
    ("postgresql://db.example/mail?keepalives_idle=60&options=-c%20search_path%3Dmail", {
        "host": "db.example", "dbname": "mail", "keepalives": "1", "keepalives_idle": "60",
        "keepalives_interval": "5", "keepalives_count": "3",
        "options": "-c search_path=mail -c statement_timeout=15000"}),
])
def test_every_connection_has_keepalives_and_a_statement_timeout(dsn, expected):
    assert parse_dsn(connection_dsn(dsn, 15)) == expected


@pt.ensureDeferred
async def test_the_statement_timeout_is_set_and_its_cancel_keeps_the_connection(fresh_dsn):
    db = Database(reactor, fresh_dsn, 1, statement_timeout=1)
    await db.start()
    try:
        before = await db.fetchone("SELECT pg_backend_pid() AS pid, current_setting('statement_timeout') AS timeout")
        assert before["timeout"] == "1s"
        with pytest.raises(psycopg2.errors.QueryCanceled):
            await db.execute("SELECT pg_sleep(3)")
        after = await db.fetchone("SELECT pg_backend_pid() AS pid")
        assert after["pid"] == before["pid"]
    finally:
        db.stop()


async def _one_statement(db):
    return await db.fetchone("SELECT 1 AS one")


async def _one_transaction(db):
    async def body(txn):
        await txn.execute("SELECT 1")
        return await txn.fetchone("SELECT 1 AS one")

    return await db.run("one", body)


async def _once_back(ask, db):
    """``ask(db)`` once the pool has a connection again (until then, statements fail at once)."""
    async def answer() -> list | None:
        try:
            return [await ask(db)]
        except DatabaseUnavailable as e:
            assert "database not answering" in str(e)
            return None

    return (await async_until(answer, 5, "the pool answering again"))[0]


async def _backend(db) -> int:
    return (await db.fetchone("SELECT pg_backend_pid() AS pid"))["pid"]


@pytest.mark.parametrize("ask", [_one_statement, _one_transaction])
@pt.ensureDeferred
async def test_a_server_that_does_not_answer_misses_the_deadline_and_is_replaced(fresh_dsn, ask):
    clock = Clock()
    db = Database(reactor, fresh_dsn, 1, statement_timeout=1, clock=clock)
    await db.start()
    try:
        stopped = (await db.fetchone("SELECT pg_backend_pid() AS pid"))["pid"]
        os.kill(stopped, signal.SIGSTOP)  # the connection's backend: its socket stays open
        try:
            asked = defer.ensureDeferred(ask(db))
            clock.advance(1 + DEADLINE_GRACE - 0.1)
            assert not asked.called
            clock.advance(0.1)
            assert asked.called  # at once: not when the server comes back
            with pytest.raises(QueryTimedOut, match="did not answer a statement within 6 s"):
                await asked
        finally:
            os.kill(stopped, signal.SIGCONT)
        # The connection was dropped and replaced: the same pool answers, from another backend.
        assert (await _once_back(ask, db)) == {"one": 1}
        assert (await _backend(db)) != stopped
    finally:
        db.stop()


@pt.ensureDeferred
async def test_after_a_missed_deadline_the_idle_connections_are_replaced_too(fresh_dsn):
    clock = Clock()
    db = Database(reactor, fresh_dsn, 2, statement_timeout=1, clock=clock)
    await db.start()

    async def both_backends(db) -> set[int]:  # two statements at once take both connections
        try:
            return set(await defer.gatherResults([defer.ensureDeferred(_backend(db)) for _ in range(2)],
                                                 consumeErrors=True))
        except defer.FirstError as e:
            e.subFailure.raiseException()

    try:
        before = await both_backends(db)
        stopped, idle = sorted(before)
        os.kill(stopped, signal.SIGSTOP)
        try:
            asked = [defer.ensureDeferred(db.fetchone("SELECT pg_backend_pid() AS pid")) for _ in range(2)]
            await async_until(lambda: any(d.called for d in asked), 2, "an answer from the other backend",
                              interval=0.01)
            assert [d.called for d in asked].count(True) == 1  # the other backend answered
            (hanging,) = [d for d in asked if not d.called]

            def ask_again(failure):  # at once, as queued requests would
                failure.trap(QueryTimedOut)
                return defer.DeferredList([defer.ensureDeferred(_backend(db)) for _ in range(2)],
                                          consumeErrors=True)

            asked_again = hanging.addErrback(ask_again)
            clock.advance(1 + DEADLINE_GRACE)
            # Neither reached the idle connection (dropped first); both failed at once, with no
            # retries, since the server is silent until a connection comes back.
            outcomes = await asked_again
            assert [ok or str(f.value) for ok, f in outcomes] == ["query: database not answering"] * 2
        finally:
            os.kill(stopped, signal.SIGCONT)
        assert not (await _once_back(both_backends, db)) & before
    finally:
        db.stop()


#: Foreign keys without an index on their columns, and why that is right: their referenced rows
#: are deleted one at a time, by a person, from small tables (a domain, a segment, a template,
#: a tenant): one scan each. An index on ``deliveries.tenant_id`` or ``emails.domain_id`` would
#: cost every accepted e-mail a write for that rare scan.
UNINDEXED_FOREIGN_KEYS_ALLOWED = {
    "api_keys.api_keys_domain_id_fkey", "broadcasts.broadcasts_segment_id_fkey",
    "deliveries.deliveries_tenant_id_fkey", "emails.emails_domain_id_fkey", "sessions.sessions_tenant_id_fkey",
    "template_versions.template_versions_tenant_id_fkey", "templates.templates_current_version",
}


@pt.ensureDeferred
async def test_every_foreign_key_has_an_index_on_its_columns(db):
    # A delete (or a key change) on the referenced table looks up the referencing rows: without
    # an index led by the key's columns, each deleted row scans the whole referencing table
    # (pruning events scanned every webhook delivery once per event).
    rows = await db.fetchall(
        "SELECT c.conrelid::regclass::text AS tab, c.conname AS name FROM pg_constraint c"
        " WHERE c.contype = 'f' AND NOT EXISTS ("
        "   SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid"
        "   AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey"
        "   AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] <@ c.conkey)"
        " ORDER BY 1, 2")
    missing = {f"{r['tab']}.{r['name']}" for r in rows}
    assert missing <= UNINDEXED_FOREIGN_KEYS_ALLOWED, " ".join(sorted(missing - UNINDEXED_FOREIGN_KEYS_ALLOWED))
