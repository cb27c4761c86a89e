"""
The hand-over of events to the webhook fan-out (migration 0027, docs/decisions.md, "Webhook
hand-over"): an event is fanned out once its transaction commits, whatever the order of ids,
exactly once, also when a fan-out fails midway; retention keeps what is not fanned out.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg2
import pytest
import pytest_twisted as pt

from mailsvc.ids import uuid7
from mailsvc.store import events
from mailsvc.store import webhooks as rows
from mailsvc.store.migrate import migration_files
from mailsvc.store.notify import Notifications
from tests.helpers.polling import async_until

DATA = {"domain_id": "d1", "domain": "example.com", "status": "verified", "previous": "pending"}


def _now(clock) -> datetime:
    return datetime.fromtimestamp(clock.seconds(), UTC)


async def _fan_out(rig, limit: int = 100) -> int:
    return await rig.db.run("fan out", rows.fan_out, _now(rig.clock), limit)


async def _deliveries_per_event(db) -> dict[uuid.UUID, int]:
    found = await db.fetchall("SELECT event_id, count(*) AS n FROM webhook_deliveries GROUP BY event_id")
    return {row["event_id"]: row["n"] for row in found}


@pt.ensureDeferred
async def test_writers_committing_in_the_reverse_order_of_their_ids_are_each_fanned_out_once(rig, fresh_dsn):
    node = rig.node()
    for path in ("/a", "/b"):
        await rig.webhook(node, path=path)
    writers = [psycopg2.connect(fresh_dsn) for _ in range(6)]
    try:
        ids = []
        for conn in writers:  # each transaction makes its event's id, in order, before any commits
            values, parameters = events.rows(rig.clock, [(rig.tenant_id, "domain.updated", DATA)])
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO events ({events.COLUMNS}) VALUES {values}", parameters)
            ids.append(parameters[0])
            rig.clock.advance(0.002)
        assert ids == sorted(ids)
        assert await _fan_out(rig) == 0  # nothing committed yet
        taken = []
        for conn in reversed(writers):  # the newest id commits first, the oldest last
            conn.commit()
            taken.append(await _fan_out(rig))
        assert taken == [1] * len(writers)  # each seen as soon as it committed, none skipped
    finally:
        for conn in writers:
            conn.close()
    assert await _deliveries_per_event(rig.db) == {event_id: 2 for event_id in ids}
    assert await _fan_out(rig) == 0
    assert (await rig.db.fetchone("SELECT count(*) AS n FROM webhook_handover"))["n"] == 0


@pt.ensureDeferred
async def test_a_fan_out_that_fails_midway_leaves_its_events_to_the_next(rig):
    node = rig.node()
    await rig.webhook(node)
    written = [await rig.event() for _ in range(3)]

    async def crashed(txn):
        assert await rows.fan_out(txn, _now(rig.clock), 100) == 3
        raise RuntimeError("the worker died before its commit")

    with pytest.raises(RuntimeError):
        await rig.db.run("fan out, then fail", crashed)
    assert await _deliveries_per_event(rig.db) == {}
    assert await _fan_out(rig) == 3
    assert await _fan_out(rig) == 0
    assert await _deliveries_per_event(rig.db) == {event_id: 1 for event_id in written}


@pt.ensureDeferred
async def test_a_step_takes_about_its_batch_and_one_statement_of_many_events_is_split(rig):
    node = rig.node()
    await rig.webhook(node)
    many = [(rig.tenant_id, "domain.updated", DATA)] * 1200
    await rig.db.run("many events", events.record_many, rig.clock, many)
    handed = await rig.db.fetchall("SELECT cardinality(event_ids) AS n FROM webhook_handover ORDER BY id")
    assert [row["n"] for row in handed] == [500, 500, 200]
    assert await _fan_out(rig, 600) == 1000  # rows until the batch is reached: the one over it too
    assert await _fan_out(rig, 600) == 200
    assert sum((await _deliveries_per_event(rig.db)).values()) == 1200


@pt.ensureDeferred
async def test_one_dispatcher_fans_out_and_its_notify_wakes_the_others(rig):
    """A node's other dispatchers neither fan out nor hear "events"; the fan-out's NOTIFY tells
    them that deliveries were queued."""
    follower, leader = rig.node(fans_out=False), rig.node(max_in_flight=0)  # the leader claims nothing
    assert (follower.dispatcher.channel, leader.dispatcher.channel) == (rows.QUEUED_CHANNEL, events.CHANNEL)
    await rig.webhook(leader)
    heard: list[str] = []
    notifications = Notifications(rig.db)
    await notifications.listen(rows.QUEUED_CHANNEL, heard.append)
    try:
        await rig.event()
        await follower.run()
        assert rig.received == [] and await _deliveries_per_event(rig.db) == {}
        await leader.run()
        await async_until(lambda: heard, 5, "the fan-out's NOTIFY")
        await follower.run()
        assert len(rig.received) == 1 and leader.fetcher.posts == 0
    finally:
        notifications.stop()


@pt.ensureDeferred
async def test_pruning_keeps_the_events_still_to_be_fanned_out(rig):
    node = rig.node()
    await rig.webhook(node)
    fanned = await rig.event()
    await _fan_out(rig)
    rig.clock.advance(60)
    waiting = await rig.event()
    rig.clock.advance(60)
    await rows.prune(rig.db, _now(rig.clock), _now(rig.clock))
    left = await rig.db.fetchall("SELECT id FROM events")
    assert [row["id"] for row in left] == [waiting]
    assert fanned != waiting


def test_the_migration_hands_over_the_events_not_fanned_out(fresh_dsn):
    """Migration 0027 on a database at 0026 with events fanned out and not."""
    conn = psycopg2.connect(fresh_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            for version, _, text in migration_files():
                if version == 27:
                    break
                cur.execute(text)
            tenant_id = uuid.uuid4()
            cur.execute("INSERT INTO tenants (id, name, plan, daily_quota, monthly_quota, send_rate_per_sec,"
                        " api_rate_per_sec, created_at, updated_at) VALUES (%s, 't', 'free', 1, 1, 1, 1, now(), now())",
                        (str(tenant_id),))
            start = datetime(2026, 1, 1, tzinfo=UTC)
            made = [(uuid7(start.timestamp() + i), start + timedelta(seconds=i), i % 3 == 0)
                    for i in range(1200)]
            cur.executemany("INSERT INTO events (id, tenant_id, type, data, created_at, fanned_out)"
                            " VALUES (%s, %s, 'domain.updated', '{}', %s, %s)",
                            [(str(event_id), str(tenant_id), at, done) for event_id, at, done in made])
            cur.execute(migration_files()[26][2])
            cur.execute("SELECT event_ids, oldest FROM webhook_handover ORDER BY id")
            handed = cur.fetchall()
        waiting = [(event_id, at) for event_id, at, done in made if not done]
        assert [len(ids) for ids, _ in handed] == [500, 300]
        assert [uuid.UUID(str(i)) for ids, _ in handed for i in ids] == [event_id for event_id, _ in waiting]
        assert [oldest for _, oldest in handed] == [waiting[0][1], waiting[500][1]]
    finally:
        conn.close()
