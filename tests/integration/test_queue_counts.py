"""The queue's counts (migration 0026) against a pass over the whole queue (``queue.recount``)
after every kind of change to deliveries: accept, claim, defer, deliver, hold, release, retry,
bounce, the retry window's end, a lease that ran out, a bulk insert and a delete, folds; each
summed up at instants around the minute the rows are due in."""

import uuid
from datetime import timedelta

import pytest_twisted as pt
from twisted.internet import reactor

from mailsvc import timefmt
from mailsvc.app.audit import AuditLog
from mailsvc.app.queue import Queue
from mailsvc.domain.queue import QueueFilter
from mailsvc.store import queue
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)
from tests.integration.test_operator_queue import deferred_queue


def _now():
    return timefmt.from_seconds(reactor.seconds())


def _keyed(rows: list[dict], key: str) -> dict:
    found: dict = {}
    for r in rows:
        slot = (str(r[key]), r["state"], r["last_response"])
        n, oldest, next_due = found.get(slot, (0, None, None))
        found[slot] = (n + r["n"], min(filter(None, (oldest, r["oldest"])), default=None),
                       min(filter(None, (next_due, r["next_due"])), default=None))
    return found


async def agree(db, now) -> dict:
    """The counts summed up at ``now`` and a minute and a half around it equal the full pass;
    their oldest and next due are never later than the rows'. The counts by state."""
    for at in (now - timedelta(seconds=90), now, now + timedelta(seconds=30), now + timedelta(seconds=90)):
        kept, passed = await queue.summary(db, at), await queue.recount(db, at)
        for kind, key in (("destinations", "destination"), ("tenants", "tenant_id")):
            mine, theirs = _keyed(kept[kind], key), _keyed(passed[kind], key)
            assert {k: v[0] for k, v in mine.items()} == {k: v[0] for k, v in theirs.items()}, (kind, at)
            for slot, (_, oldest, next_due) in theirs.items():
                assert mine[slot][1] is None or oldest is None or mine[slot][1] <= oldest, slot
                assert mine[slot][2] is None or next_due is None or mine[slot][2] <= next_due, slot
    states: dict[str, int] = {}
    for r in (await queue.summary(db, now))["destinations"]:
        states[r["state"]] = states.get(r["state"], 0) + r["n"]
    return states


@pt.ensureDeferred
async def test_the_counts_agree_with_a_full_pass_after_every_change(mta):
    db = mta.parts.db
    now = _now()
    assert await agree(db, now) == {}
    # Accept, claim, defer (the sink answers 4xx): every delivery deferred.
    made = await deferred_queue(mta)
    assert await agree(db, now) == {"deferred": 5}
    operator = Queue(reactor, db, AuditLog(reactor, db))

    # Hold a destination, then release it; retry a tenant's now.
    assert await operator.hold(QueueFilter(destination="b.example"), "maintenance", "operator") == 3
    assert await agree(db, now) == {"deferred": 2, "held": 3}
    assert await operator.release(QueueFilter(destination="b.example"), "operator") == 3
    assert sum((await agree(db, _now())).values()) == 5  # due again, or taken by the delivery worker

    # A claim's lease (this minute, the next, one long over), then its outcome.
    leased = await db.fetchall("SELECT id FROM deliveries WHERE status IN ('queued', 'deferred') ORDER BY id")
    ids = [r["id"] for r in leased]
    at = _now()
    for lease in (timedelta(seconds=20), timedelta(seconds=75), -timedelta(hours=1)):
        await db.execute("UPDATE deliveries SET due_at = %s, claim = %s, claimed_until = %s WHERE id = ANY(%s)",
                         (at + lease, uuid.uuid4(), at + lease, ids[:2]))
        await agree(db, at)
    # A lease that ends later than the row is due (postponed rows keep their old lease).
    await db.execute("UPDATE deliveries SET due_at = %s WHERE id = %s", (at - timedelta(minutes=3), ids[0]))
    await agree(db, at)
    await db.execute("UPDATE deliveries SET status = 'deferred', due_at = %s, claim = NULL, claimed_until = NULL,"
                     " attempts = attempts + 1, last_response = '421 4.7.0 try later' WHERE id = ANY(%s)",
                     (at + timedelta(minutes=5), ids[:2]))
    await agree(db, at)

    # Deliver one (retry now with the sink accepting), bounce a tenant's, the retry window's end.
    del mta.sink.rcpt_replies["dan@c.example"]
    assert await operator.retry(QueueFilter(destination="c.example"), "operator") == 1
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    await agree(db, _now())
    assert await operator.bounce(QueueFilter(tenant_id=uuid.UUID(made["a"]["id"])), "operator") >= 1
    await agree(db, _now())
    await db.execute("UPDATE deliveries SET retry_until = now() - interval '1 second'"
                     " WHERE status IN ('queued', 'deferred')")
    await operator.hold(QueueFilter(tenant_id=uuid.UUID(made["b"]["id"])), "expiry", "operator")
    await operator.release(QueueFilter(tenant_id=uuid.UUID(made["b"]["id"])), "operator")
    assert await agree(db, _now()) == {}

    # Many rows in one statement (as a broadcast's fan-out writes them), folds, a delete.
    email = await db.fetchone("SELECT id, tenant_id FROM emails ORDER BY id LIMIT 1")
    await db.execute(
        "INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)"
        " SELECT gen_random_uuid(), %s, %s, 'r' || g || '@d' || (g %% 7) || '.example',"
        " CASE WHEN g %% 2 = 0 THEN 'queued' ELSE 'deferred' END, now() + g * interval '13 seconds', now(),"
        " now() + interval '72 hours' FROM generate_series(1, 300) g", (email["id"], email["tenant_id"]))
    later = _now()
    assert sum((await agree(db, later)).values()) == 300
    assert await queue.fold_counts(db) > 0
    assert sum((await agree(db, later)).values()) == 300
    await db.execute("DELETE FROM deliveries WHERE recipient LIKE '%%@d3.example'")
    await queue.fold_counts(db)
    assert sum((await agree(db, later)).values()) == 300 - 43
    rows = await db.fetchone("SELECT count(*) AS n, count(*) FILTER (WHERE n = 0) AS empty FROM queue_counts")
    assert rows["empty"] == 0
