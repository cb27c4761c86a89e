"""The Database type and migrations, on the real PostgreSQL."""

import psycopg2
import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, task

from mailsvc.deferreds import when_done
from mailsvc.store.database import Database
from mailsvc.store.migrate import SCHEMA_VERSION, migrate, migration_files


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
    for _ in range(50):
        if got:
            break
        await task.deferLater(reactor, 0.01, lambda: None)
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
    await db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    # The killed backends are noticed and reconnected; queries that meet a dead connection retry.
    await task.deferLater(reactor, 0.5, lambda: None)
    results = await defer.gatherResults(
        [defer.ensureDeferred(db.fetchone("SELECT 1 AS one")) for _ in range(16)]
    )
    assert all(r["one"] == 1 for r in results)
