"""
Adaptive per-destination shaping: the shared limits on the real PostgreSQL with a Clock, and
a 421 storm from the sink end to end (shrink, then recovery). The rules as tables:
tests/unit/test_shaping_rules.py.
"""

import pytest
import pytest_twisted as pt
from twisted.internet import defer
from twisted.internet.task import Clock

from mailsvc.delivery.shaping import Shaper, TooLateForSlot
from mailsvc.domain.shaping import Limits
from mailsvc.domain.shares import Share

FALLBACK = Limits(10, 0)


@pt.ensureDeferred
async def test_limits_are_shared_and_recover_slowly(db):
    clock = Clock()
    clock.advance(1_000_000)
    one, two = Shaper(clock, db, "default", FALLBACK), Shaper(clock, db, "default", FALLBACK)
    await one.sync()
    assert one.limits("google.com") == Limits(10, 20)  # from the migration's defaults
    one.throttle("google.com")
    one.throttle("google.com")
    await one.written()
    await two.sync()
    assert two.limits("google.com") == Limits(2, 5)
    # Success within the quiet time changes nothing; after it, one step up.
    two.succeed("google.com")
    assert two.limits("google.com") == Limits(2, 5)
    clock.advance(61)
    two.succeed("google.com")
    await two.written()
    await one.sync()
    assert one.limits("google.com") == Limits(3, 6.25)
    # A node's late recovery never undoes another node's newer shrink.
    clock.advance(61)
    one.throttle("google.com")
    await one.written()
    two.succeed("google.com")  # two still thinks it may grow
    await two.written()
    (row,) = await db.fetchall("SELECT concurrency FROM destination_limits WHERE destination = 'google.com'")
    assert row["concurrency"] == 1


@pt.ensureDeferred
async def test_a_shrink_seen_by_one_worker_divides_between_the_nodes_workers(db):
    """The stored limits are the node's; each worker (a Share) gates by its part of them."""
    clock = Clock()
    clock.advance(1_000_000)
    first, second = (Shaper(clock, db, "default", FALLBACK, share=Share(slot, 2)) for slot in range(2))
    await first.sync()
    first.throttle("google.com")  # 10 / 20 → 5 / 10 for the node
    await first.written()
    await second.sync()
    assert second.limits("google.com") == Limits(5, 10)
    assert (first.own("google.com"), second.own("google.com")) == (Limits(3, 5), Limits(2, 5))
    (row,) = await db.fetchall("SELECT concurrency FROM destination_limits WHERE destination = 'google.com'")
    assert row["concurrency"] == 5


@pt.ensureDeferred
async def test_the_gate_holds_the_concurrency_and_the_rate(db):
    clock = Clock()
    shaper = Shaper(clock, db, "default", Limits(2, 1))
    await shaper.acquire("a.example.com", 100)
    third = None
    second = defer.ensureDeferred(shaper.acquire("b.example.com", 100))  # one provider: example.com
    assert not second.called  # the rate: one start a second
    clock.advance(1)
    assert second.called
    third = defer.ensureDeferred(shaper.acquire("a.example.com", 100))
    clock.advance(5)
    assert not third.called  # two in use
    shaper.release("a.example.com")
    clock.advance(1)
    assert third.called
    late = defer.ensureDeferred(shaper.acquire("a.example.com", clock.seconds() + 3))
    clock.advance(3)
    with pytest.raises(TooLateForSlot):
        await late


@pt.ensureDeferred
async def test_a_421_storm_shrinks_the_destination_and_success_grows_it_back(mta):
    mta.route("example.net")
    mta.sink.greeting = b"421 4.7.0 Too many connections from your IP, slow down"
    _, key = await mta.sender()
    ids = [await mta.send(key, [f"r{i}@example.net"]) for i in range(4)]
    for email_id in ids:
        (row,) = await mta.settled_past(email_id)
        assert row["status"] == "deferred"
    shaper = mta.parts.shaper
    await shaper.written()
    (row,) = await mta.parts.db.fetchall(
        "SELECT destination, concurrency, rate_per_sec FROM destination_limits")
    assert row["destination"] == "example.net" and row["concurrency"] < 10 and 0 < row["rate_per_sec"] <= 50
    shrunk = row["concurrency"]
    _, metrics = await mta.request("GET", "/metrics", mta.operator_token)
    assert f'mailsvc_destination_concurrency_limit{{destination="example.net"}} {float(shrunk)}'.encode() in metrics
    code, listed, _ = await mta.json("GET", "/admin/v1/destinations", mta.operator_token)
    assert code == 200 and listed["data"][0]["destination"] == "example.net"
    assert listed["data"][0]["concurrency"] == shrunk
    assert {"pattern": "google.com", "concurrency": 10, "rate_per_sec": 20.0} in [
        {k: d[k] for k in ("pattern", "concurrency", "rate_per_sec")} for d in listed["defaults"]]

    # The storm is over; the quiet time passed (as if a minute went by): one step back up.
    mta.sink.greeting = None
    await mta.parts.db.execute("UPDATE destination_limits SET changed_at = changed_at - 61")
    await shaper.sync()
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now()")
    mta.parts.delivery.wake()
    await mta.sink.wait_for(4)
    await mta.settled()
    await shaper.written()
    (row,) = await mta.parts.db.fetchall("SELECT concurrency FROM destination_limits")
    assert row["concurrency"] == shrunk + 1

    # The operator edits a default and resets the destination.
    code, edited, _ = await mta.json("PUT", "/admin/v1/destinations/defaults/example.net", mta.operator_token,
                                     json={"concurrency": 3, "rate_per_sec": 2.5})
    assert code == 200 and edited["concurrency"] == 3
    code, _, _ = await mta.json("DELETE", "/admin/v1/destinations/example.net", mta.operator_token)
    assert code == 200
    await shaper.sync()
    assert shaper.limits("example.net") == Limits(3, 2.5)
    code, body, _ = await mta.json("PUT", "/admin/v1/destinations/defaults/x.example", mta.operator_token,
                                   json={"concurrency": 0, "rate_per_sec": 1})
    assert code == 422
