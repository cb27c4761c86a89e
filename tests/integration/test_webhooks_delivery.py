"""
Webhook delivery: real HTTPS requests to a receiver on loopback, verified with the ``svix``
and ``standardwebhooks`` packages; the schedule driven by a Clock; several dispatchers on
one database.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime

import attrs
import pytest
import pytest_twisted as pt
import resend
import standardwebhooks
import svix.webhooks
from twisted.internet import defer, reactor, task

from mailsvc import service
from mailsvc.config import load
from mailsvc.domain.webhooks import NATIVE_NAMING, RETRY_DELAYS, new_webhook, webhook_change
from mailsvc.store import events
from mailsvc.store import webhooks as rows
from mailsvc.store.database import Database
from mailsvc.webhooks.dispatcher import HOST_WAIT_SECONDS, LEASE_SECONDS, HostLimits
from tests.helpers.outside import Reply
from tests.helpers.webhooks import webhook_tenant

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


async def _all_fanned_out(db: Database) -> bool:
    """Events were written and none waits in the hand-over any more."""
    row = await db.fetchone("SELECT EXISTS (SELECT 1 FROM events) AND NOT EXISTS (SELECT 1 FROM webhook_handover)"
                            " AS done")
    return row["done"]


def _families(request) -> tuple[dict, dict]:
    svix_headers = {k: v for k, v in request.headers.items() if k.startswith("svix-")}
    standard = {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    return svix_headers, standard


def _verify(secret: str, request) -> dict:
    """Verify one delivery with both libraries, each on its own header family."""
    svix_headers, standard = _families(request)
    assert len(svix_headers) == 3 and len(standard) == 3
    assert [svix_headers[f"svix-{n}"] for n in ("id", "timestamp", "signature")] == [
        standard[f"webhook-{n}"] for n in ("id", "timestamp", "signature")
    ]
    svix.webhooks.Webhook(secret).verify(request.body, svix_headers)
    return standardwebhooks.Webhook(secret).verify(request.body, standard)


def _signed_by(secret: str, request) -> bool:
    """Whether one of the request's signatures is the secret's (at any timestamp)."""
    headers = request.headers
    expected = standardwebhooks.Webhook(secret).sign(
        headers["webhook-id"], datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC),
        request.body.decode(),
    )
    return expected in headers["webhook-signature"].split(" ")


@pt.ensureDeferred
async def test_deliveries_are_signed_under_both_header_families(rig):
    node = rig.node()
    row, secret = await rig.webhook(node, ("domain.updated", "email.delivered"))
    domain_event = await rig.event()
    await rig.event("email.sent", {"email_id": "e1"})  # not subscribed
    delivered = {"email_id": "e2", "delivery_id": "x", "to": ["a@b.example"], "recipient": "a@b.example",
                 "transport": "smtp", "remote_host": "mx.b.example", "response": "250 ok",
                 "created_at": "2026-01-01T00:00:00.000000Z"}
    email_event = await rig.event("email.delivered", delivered)
    await node.run()

    assert len(rig.received) == 2
    by_type = {}
    for request in rig.received:
        assert request.method == "POST" and request.path == "/hook"
        assert request.headers["content-type"] == "application/json"
        document = _verify(secret, request)
        assert set(document) == {"type", "created_at", "data"}
        assert ISO.match(document["created_at"]), document["created_at"]
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
        resend.Webhooks.verify({
            "payload": request.body.decode(), "webhook_secret": secret,
            "headers": {"id": request.headers["svix-id"], "timestamp": request.headers["svix-timestamp"],
                        "signature": request.headers["svix-signature"]},
        })
        by_type[document["type"]] = (document, request)
    document, request = by_type["domain.updated"]
    assert document["data"] == {"domain_id": "d1", "domain": "example.com", "status": "verified", "previous": "pending"}
    assert request.headers["webhook-id"] == "evt_" + domain_event.hex
    assert by_type["email.delivered"][0]["data"] == delivered
    assert by_type["email.delivered"][1].headers["webhook-id"] == "evt_" + email_event.hex
    # A wrong secret does not verify.
    other, _ = await rig.webhook(node)
    _, wrong = await node.registry.get(rig.tenant_id, other["id"])
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(wrong).verify(request.body, _families(request)[1])

    states = await rig.db.fetchall("SELECT state, attempts, last_status FROM webhook_deliveries")
    assert states == [{"state": "delivered", "attempts": 1, "last_status": 204}] * 2
    assert await _all_fanned_out(rig.db) is True


@pt.ensureDeferred
async def test_retries_follow_the_schedule_with_a_stable_id_and_body(rig):
    node = rig.node()
    row, secret = await rig.webhook(node)
    rig.receiver.replies = [Reply(500, {}, b"boom")] * len(RETRY_DELAYS)
    event_id = await rig.event()
    await node.run()
    assert len(rig.received) == 1
    for attempt, delay in enumerate(RETRY_DELAYS, start=1):
        state = await rig.delivery(row["id"], event_id)
        assert (state["state"], state["attempts"], state["last_status"]) == ("pending", attempt, 500)
        assert state["last_response"] == "boom"
        await node.dispatcher.step()  # plans a wake-up for the retry
        (wake,) = [c for c in rig.clock.getDelayedCalls() if c.func == node.dispatcher.wake]
        assert wake.getTime() == pytest.approx(rig.clock.seconds() + delay, abs=0.01)
        rig.clock.advance(delay - 1)
        await node.run()
        assert len(rig.received) == attempt  # not yet
        rig.clock.advance(1)
        await node.run()
        assert len(rig.received) == attempt + 1
    state = await rig.delivery(row["id"], event_id)
    assert (state["state"], state["attempts"], state["last_status"]) == ("delivered", 8, 204)
    first = rig.received[0]
    assert {r.headers["webhook-id"] for r in rig.received} == {first.headers["webhook-id"]}
    assert {r.body for r in rig.received} == {first.body}
    assert all(_signed_by(secret, r) for r in rig.received)
    stamps = [int(r.headers["webhook-timestamp"]) for r in rig.received]
    assert [b - a for a, b in zip(stamps, stamps[1:], strict=False)] == list(RETRY_DELAYS)


@pt.ensureDeferred
async def test_a_delivery_fails_after_the_last_attempt(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    rig.receiver.default = Reply(503)
    event_id = await rig.event()
    await node.run()
    for delay in RETRY_DELAYS:
        rig.clock.advance(delay)
        await node.run()
    state = await rig.delivery(row["id"], event_id)
    assert (state["state"], state["attempts"], state["last_status"]) == ("failed", 8, 503)
    await node.dispatcher.step()
    assert not [c for c in rig.clock.getDelayedCalls() if c.func == node.dispatcher.wake]
    rig.clock.advance(86400)
    await node.run()
    assert len(rig.received) == 8


@pt.ensureDeferred
async def test_retry_after_can_only_push_a_retry_later(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    # Third attempt at +420 s; the schedule says 30 min more, the date says an hour.
    later = datetime.fromtimestamp(int(rig.clock.seconds()) + 420 + 3600, UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    rig.receiver.replies = [
        Reply(503, {"Retry-After": "120"}),    # 120 s instead of 5 s
        Reply(429, {"Retry-After": "1"}),      # the schedule's 5 min stands
        Reply(503, {"Retry-After": later}),    # an HTTP date
    ]
    event_id = await rig.event()
    await node.run()
    started = rig.clock.seconds()
    due = (await rig.delivery(row["id"], event_id))["due_at"].timestamp()
    assert due - started == pytest.approx(120, abs=0.01)
    rig.clock.advance(120)
    await node.run()
    due2 = (await rig.delivery(row["id"], event_id))["due_at"].timestamp()
    assert due2 - rig.clock.seconds() == pytest.approx(300, abs=0.01)
    rig.clock.advance(300)
    await node.run()
    assert len(rig.received) == 3
    due3 = (await rig.delivery(row["id"], event_id))["due_at"].timestamp()
    assert due3 == pytest.approx(started + 420 + 3600, abs=1)


@pt.ensureDeferred
async def test_after_a_rotation_both_secrets_sign_for_a_day(rig):
    node = rig.node()
    row, old = await rig.webhook(node)
    new = await node.registry.rotate(rig.tenant_id, row["id"])
    await rig.event()
    await node.run()
    (request,) = rig.received
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    assert request.headers["svix-signature"] == request.headers["webhook-signature"]
    _verify(old, request)
    _verify(new, request)

    rig.clock.advance(24 * 3600 + 1)
    await rig.event()
    await node.run()
    latest = rig.received[-1]
    assert len(latest.headers["webhook-signature"].split(" ")) == 1
    assert _signed_by(new, latest) and not _signed_by(old, latest)


@pt.ensureDeferred
async def test_a_rotation_signs_the_next_delivery_with_the_new_secret_at_once(rig):
    """The dispatcher keeps the keys it opened; a rotation's new secret signs the very next
    delivery all the same."""
    node = rig.node()
    row, old = await rig.webhook(node)
    await rig.event()
    await node.run()
    assert _signed_by(old, rig.received[-1])

    new = await node.registry.rotate(rig.tenant_id, row["id"])
    await rig.event()
    await node.run()
    latest = rig.received[-1]
    assert len(latest.headers["webhook-signature"].split(" ")) == 2
    _verify(new, latest)
    _verify(old, latest)


@pt.ensureDeferred
async def test_a_disabled_webhook_gets_nothing_and_its_queue_is_dropped(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    rig.receiver.default = Reply(500)
    first = await rig.event()
    await node.run()
    assert (await rig.delivery(row["id"], first))["state"] == "pending"

    await node.registry.update(rig.tenant_id, row["id"], webhook_change({"status": "disabled"}))
    assert await rig.delivery(row["id"], first) is None  # dropped
    rig.receiver.default = Reply(204)
    second = await rig.event()
    rig.clock.advance(3600)
    await node.run()
    assert len(rig.received) == 1
    assert await rig.delivery(row["id"], second) is None

    await node.registry.update(rig.tenant_id, row["id"], webhook_change({"status": "enabled"}))
    third = await rig.event()
    await node.run()
    assert len(rig.received) == 2
    assert rig.received[-1].headers["webhook-id"] == "evt_" + third.hex

    await node.registry.delete(rig.tenant_id, row["id"])
    await rig.event()
    await node.run()
    assert len(rig.received) == 2
    assert (await rig.db.fetchone("SELECT count(*) AS n FROM webhook_deliveries"))["n"] == 0


@pt.ensureDeferred
async def test_a_webhook_disabled_mid_retry_is_not_claimed(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    event_id = await rig.event()
    # Disabled between fan-out and claim: the claim itself skips it.
    await rig.db.run("fan out", rows.fan_out, datetime.fromtimestamp(rig.clock.seconds(), UTC), 100)
    await rig.db.execute("UPDATE webhooks SET status = 'disabled'")
    await node.run()
    assert rig.received == []
    assert (await rig.delivery(row["id"], event_id))["attempts"] == 0


@pt.ensureDeferred
async def test_only_the_tenants_subscribed_events_from_after_the_webhook_was_made(rig):
    node = rig.node()
    early = await rig.event()
    rig.clock.advance(1)
    row, _ = await rig.webhook(node, ("email.bounced",))
    await rig.event()  # domain.updated: not subscribed
    other_tenant = await webhook_tenant(rig.clock, rig.db, "other")
    await rig.event("email.bounced", {"email_id": "e9"}, tenant_id=other_tenant)
    mine = await rig.event("email.bounced", {"email_id": "e1"})
    await node.run()
    assert [r.headers["webhook-id"] for r in rig.received] == ["evt_" + mine.hex]
    assert await rig.delivery(row["id"], early) is None


@pt.ensureDeferred
async def test_native_webhooks_receive_native_names(rig):
    node = rig.node()
    _, secret = await rig.webhook(node, ("domain.status_changed", "message.accepted"), naming=NATIVE_NAMING)
    await rig.event()
    await rig.event("email.sent", {"email_id": "e1", "from": "a@example.com", "to": ["b@example.net"],
                                   "subject": "Hi", "tags": {}, "scheduled_at": None})
    await node.run()
    types = sorted(_verify(secret, r)["type"] for r in rig.received)
    assert types == ["domain.status_changed", "message.accepted"]


@pt.ensureDeferred
async def test_many_endpoints_in_parallel_each_under_its_cap(rig):
    node = rig.node(per_endpoint=3)
    first, _ = await rig.webhook(node, path="/a")
    second, _ = await rig.webhook(node, path="/b")
    rig.receiver.default = Reply(stall=True)
    for _ in range(10):
        await rig.event()
    await node.dispatcher.step()
    await rig.receiver.wait_for(6)
    await node.dispatcher.step()  # no room: nothing more is claimed
    claimed = await rig.db.fetchall(
        "SELECT webhook_id, count(*) AS n FROM webhook_deliveries WHERE claimed_until IS NOT NULL GROUP BY 1"
    )
    assert {r["webhook_id"]: r["n"] for r in claimed} == {first["id"]: 3, second["id"]: 3}
    assert sorted(r.path for r in rig.received) == ["/a"] * 3 + ["/b"] * 3

    rig.receiver.default = Reply(204)
    rig.receiver.release()
    await node.dispatcher.settled()
    for _ in range(10):
        await node.run()
    assert len(rig.received) == 20
    assert len({(r.path, r.headers["webhook-id"]) for r in rig.received}) == 20


@pt.ensureDeferred
async def test_two_dispatchers_on_one_database_never_deliver_an_attempt_twice(rig, fresh_dsn):
    second_db = Database(reactor, fresh_dsn, 4)
    await second_db.start()
    try:
        one, two = rig.node(per_endpoint=16), rig.node(db=second_db, per_endpoint=16)
        for path in ("/a", "/b", "/c"):
            await rig.webhook(one, path=path)
        for _ in range(150):
            await rig.event()
        for _ in range(40):
            await defer.gatherResults([defer.ensureDeferred(n.run()) for n in (one, two)])
            pending = await rig.db.fetchone(
                "SELECT count(*) AS n FROM webhook_deliveries WHERE state = 'pending'"
            )
            if pending["n"] == 0 and await _all_fanned_out(rig.db):
                break
        sent = [(r.path, r.headers["webhook-id"]) for r in rig.received]
        assert len(sent) == 450
        assert len(set(sent)) == 450
        assert one.fetcher.posts > 0 and two.fetcher.posts > 0
        assert one.fetcher.posts + two.fetcher.posts == 450
    finally:
        for node in rig.nodes[1:]:
            await node.stop()
        del rig.nodes[1:]
        second_db.stop()


@pt.ensureDeferred
async def test_a_dead_nodes_attempt_is_taken_over_when_its_lease_ends(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    event_id = await rig.event()
    now = rig.clock.seconds()
    when = datetime.fromtimestamp(now, UTC)
    await rig.db.run("fan out", rows.fan_out, when, 100)
    dead_claim = uuid.uuid4()
    lease = datetime.fromtimestamp(now + LEASE_SECONDS, UTC)
    taken = await rig.db.run("claim", rows.claim, when, lease, dead_claim, 8, 10)
    assert len(taken) == 1  # a node took it, then died

    await node.run()
    rig.clock.advance(LEASE_SECONDS - 1)
    await node.run()
    assert rig.received == []
    rig.clock.advance(1)
    await node.run()
    assert [r.headers["webhook-id"] for r in rig.received] == ["evt_" + event_id.hex]
    state = await rig.delivery(row["id"], event_id)
    assert (state["state"], state["attempts"]) == ("delivered", 1)

    # The dead node's late outcome no longer holds the claim and changes nothing.
    late = [rows.Outcome(row["id"], event_id, dead_claim, "pending", 1, when, when, 500, "x", 10, "http_5xx")]
    await rows.record_outcomes(rig.db, late)
    assert (await rig.delivery(row["id"], event_id))["state"] == "delivered"
    # Nor is it kept as an attempt: only the attempt that held the claim is.
    kept = await rig.db.fetchall("SELECT attempt, status FROM webhook_attempts WHERE event_id = %s", (event_id,))
    assert kept == [{"attempt": 1, "status": 204}]


@pt.ensureDeferred
async def test_outcomes_are_written_with_their_texts_and_times_as_they_were(rig):
    """The outcomes reach the statement as JSON text: quotes, escapes, line breaks, characters
    beyond ASCII and microseconds come out as they went in, and absent values as NULL."""
    node = rig.node()
    row, _ = await rig.webhook(node)
    answered, given_back = await rig.event(), await rig.event()
    when = datetime(2026, 12, 3, 9, 30, 1, 123457, tzinfo=UTC)
    await rig.db.run("fan out", rows.fan_out, when, 100)
    claim = uuid.uuid4()
    taken = await rig.db.run("claim", rows.claim, when, when.replace(minute=31), claim, 8, 10)
    assert len(taken) == 2
    answer = '{"error": "quota \\"x\\"",\n\t"ünïcode": "✉ 😀"}\\u0041'
    retry_at = when.replace(hour=10, microsecond=1)
    await rows.record_outcomes(rig.db, [
        rows.Outcome(row["id"], answered, claim, "pending", 1, retry_at, when, 429, answer, 7, "http_4xx"),
        rows.Outcome(row["id"], given_back, claim, "pending", 0, when),
    ])
    kept = await rig.delivery(row["id"], answered)
    assert (kept["due_at"], kept["last_attempt_at"], kept["last_status"], kept["last_response"]) == (
        retry_at, when, 429, answer)
    (attempt,) = await rig.db.fetchall("SELECT * FROM webhook_attempts WHERE event_id = %s", (answered,))
    assert (attempt["at"], attempt["status"], attempt["duration_ms"], attempt["error"], attempt["response"]) == (
        when, 429, 7, "http_4xx", answer)
    untouched = await rig.delivery(row["id"], given_back)
    assert (untouched["attempts"], untouched["last_attempt_at"], untouched["last_status"], untouched["claim"]) == (
        0, None, None, None)
    assert await rig.db.fetchall("SELECT 1 FROM webhook_attempts WHERE event_id = %s", (given_back,)) == []


@pt.ensureDeferred
async def test_a_stopping_dispatcher_gives_its_attempts_back(rig):
    node = rig.node()
    row, _ = await rig.webhook(node)
    rig.receiver.default = Reply(stall=True)
    event_id = await rig.event()
    await node.dispatcher.step()
    await rig.receiver.wait_for(1)
    await node.stop()  # waits DRAIN_SECONDS on the Clock, then abandons the attempt
    rig.nodes.remove(node)
    state = await rig.delivery(row["id"], event_id)
    assert (state["state"], state["attempts"], state["claimed_until"]) == ("pending", 0, None)

    rig.receiver.default = Reply(204)
    restarted = rig.node()
    await restarted.run()
    assert len(rig.received) == 2
    assert rig.received[0].headers["webhook-id"] == rig.received[1].headers["webhook-id"]
    assert (await rig.delivery(row["id"], event_id))["state"] == "delivered"


@pt.ensureDeferred
async def test_an_endpoint_that_turned_private_is_refused_at_delivery(rig):
    rig.dns_server.remove("hooks.example.com")
    rig.dns_server.a("hooks.example.com", "8.8.8.8")
    node = rig.node(allow_private=False)
    row, _ = await rig.webhook(node)
    rig.dns_server.remove("hooks.example.com")
    rig.dns_server.a("hooks.example.com", "10.0.0.7")  # rebinding after the check at create
    rig.clock.advance(30)  # the answer checked at create is no longer kept
    event_id = await rig.event()
    await node.run()
    state = await rig.delivery(row["id"], event_id)
    assert (state["state"], state["attempts"], state["last_status"]) == ("pending", 1, None)
    assert state["last_response"].startswith("refused: hooks.example.com (10.0.0.7) is a private address")
    assert rig.received == []


def _turns(limits: HostLimits, host: str, count: int) -> list[defer.Deferred]:
    return [limits.enter(host) for _ in range(count)]


def _started(turns: list[defer.Deferred]) -> list[int]:
    return [i for i, turn in enumerate(turns) if turn.called]


def test_a_host_takes_its_concurrency_and_the_rest_wait_in_order():
    clock = task.Clock()
    limits = HostLimits(clock, concurrency=2, rate_per_sec=1000)
    turns = _turns(limits, "192.0.2.1", 5)
    other = limits.enter("192.0.2.2")
    assert _started(turns) == [0, 1]
    assert other.called  # another host has limits of its own
    turns[3].cancel()  # a waiter that gives up leaves the others' order alone
    limits.leave("192.0.2.1")
    assert _started(turns) == [0, 1, 2, 3]  # 3 fired with its CancelledError
    turns[3].addErrback(lambda f: f.trap(defer.CancelledError))
    limits.leave("192.0.2.1")
    assert _started(turns) == [0, 1, 2, 3, 4]


def test_a_host_takes_one_seconds_rate_at_once_then_its_pace():
    clock = task.Clock()
    limits = HostLimits(clock, concurrency=100, rate_per_sec=4)
    turns = _turns(limits, "192.0.2.1", 6)
    assert _started(turns) == [0, 1, 2, 3]
    clock.advance(0.24)
    assert _started(turns) == [0, 1, 2, 3]
    clock.advance(0.01)
    assert _started(turns) == [0, 1, 2, 3, 4]
    clock.advance(0.25)
    assert _started(turns) == [0, 1, 2, 3, 4, 5]


def test_stopping_cancels_every_waiter():
    limits = HostLimits(task.Clock(), concurrency=1, rate_per_sec=1000)
    turns = _turns(limits, "192.0.2.1", 3)
    limits.stop_waiting()
    failures = [turn.addErrback(lambda f: f.trap(defer.CancelledError)) for turn in turns[1:]]
    assert all(f.called for f in failures)
    assert turns[0].called and turns[0].result is None


@pt.ensureDeferred
async def test_webhooks_of_all_tenants_share_their_target_hosts_concurrency(rig):
    """Two tenants' webhooks, one by name and one by address literal, reach one address: they
    share its 3 requests at a time; the others wait (not fail) and go out as slots free."""
    node = rig.node(host_concurrency=3)
    other_tenant = await webhook_tenant(rig.clock, rig.db, "other")
    await rig.webhook(node, path="/a")
    body = {"endpoint": f"https://127.0.0.1:{rig.https_receiver.number}/b", "events": ["domain.updated"]}
    await node.registry.create(other_tenant, new_webhook(body))
    rig.receiver.default = Reply(stall=True)
    for _ in range(5):
        await rig.event()
        await rig.event(tenant_id=other_tenant)
    await node.dispatcher.step()
    await rig.receiver.wait_for(3)
    claimed = await rig.db.fetchone(
        "SELECT count(*) AS n FROM webhook_deliveries WHERE claimed_until IS NOT NULL"
    )
    assert claimed["n"] == 10  # every webhook has room of its own: the host is the limit
    assert node.fetcher.posts == 3  # the others wait for the host before a request is made

    rig.receiver.default = Reply(204)
    rig.receiver.release()
    await node.dispatcher.settled()
    await node.run()
    assert node.fetcher.posts == 10
    assert len({(r.path, r.headers["webhook-id"]) for r in rig.received}) == 10
    states = await rig.db.fetchall("SELECT state, attempts FROM webhook_deliveries")
    assert [(r["state"], r["attempts"]) for r in states] == [("delivered", 1)] * 10


@pt.ensureDeferred
async def test_a_delivery_that_waits_too_long_for_its_host_is_given_back_unattempted(rig):
    node = rig.node(host_concurrency=1)
    await rig.webhook(node)
    rig.receiver.default = Reply(stall=True)
    await rig.event()
    await rig.event()
    await node.dispatcher.step()
    await rig.receiver.wait_for(1)
    claims = {r["event_id"]: r["claim"]
              for r in await rig.db.fetchall("SELECT event_id, claim FROM webhook_deliveries")}
    assert len(claims) == 2 and None not in claims.values()

    rig.clock.advance(HOST_WAIT_SECONDS)  # within the lease: the waiter gives up first
    await node.dispatcher.step()  # writes the give-back and claims it anew
    after = await rig.db.fetchall("SELECT event_id, claim, attempts FROM webhook_deliveries")
    assert sorted(r["attempts"] for r in after) == [0, 0]
    changed = [r["event_id"] for r in after if r["claim"] != claims[r["event_id"]]]
    assert len(changed) == 1  # the waiter's lease was handed back (then taken again)
    assert node.fetcher.posts == 1

    rig.receiver.default = Reply(204)
    rig.receiver.release()
    await node.dispatcher.settled()
    await node.run()
    assert node.fetcher.posts == 2
    after = await rig.db.fetchall("SELECT state, attempts FROM webhook_deliveries")
    assert [(r["state"], r["attempts"]) for r in after] == [("delivered", 1)] * 2


@pt.ensureDeferred
async def test_a_host_is_sent_to_at_its_rate_on_the_clock(rig):
    node = rig.node(host_rate_per_sec=2)
    await rig.webhook(node)
    for _ in range(4):
        await rig.event()
    await node.dispatcher.step()
    await rig.receiver.wait_for(2)
    assert node.fetcher.posts == 2
    rig.clock.advance(0.5)
    await rig.receiver.wait_for(3)
    assert node.fetcher.posts == 3
    rig.clock.advance(0.5)
    await node.dispatcher.settled()
    assert node.fetcher.posts == 4


@pt.ensureDeferred
async def test_a_stopping_dispatcher_gives_back_deliveries_waiting_for_their_host_at_once(rig):
    node = rig.node(host_concurrency=1)
    await rig.webhook(node)
    rig.receiver.default = Reply(stall=True)
    await rig.event()
    await rig.event()
    await node.dispatcher.step()
    await rig.receiver.wait_for(1)
    await node.stop()  # the waiter is given back first: abandoning the stalled request
    rig.nodes.remove(node)  # does not let it start
    assert node.fetcher.posts == 1
    states = await rig.db.fetchall("SELECT state, attempts, claimed_until FROM webhook_deliveries")
    assert [(r["state"], r["attempts"], r["claimed_until"]) for r in states] == [("pending", 0, None)] * 2


@pytest.fixture
def config(dns_server, ca, tmp_path):
    base = dns_server.configure(load(None, environ={}))
    return attrs.evolve(base, security=attrs.evolve(
        base.security, allow_private_targets=True, ca_file=ca.write(tmp_path / "ca.pem")
    ))


@pt.ensureDeferred
async def test_the_assembled_dispatcher_is_woken_by_notify(api, dns_server, https_receiver):
    """The node's own wiring: the role part starts LISTEN and the loop; NOTIFY wakes it long
    before its 10 s safety timer would."""
    dns_server.a("hooks.example.com", "127.0.0.1")
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/webhooks", key, json={
        "endpoint": f"https://hooks.example.com:{https_receiver.number}/hook", "events": ["domain.updated"],
    })
    assert code == 201
    tenant_id = (await api.parts.db.fetchone("SELECT tenant_id FROM webhooks"))["tenant_id"]

    async def write(status: str):
        async def body(txn):
            return await events.record(txn, reactor, tenant_id, "domain.updated", {"status": status})

        return await api.parts.db.run("event", body)

    await write("pending")  # waiting for the dispatcher's start
    for part in (api.parts.listen_connection, api.parts.engines.webhooks):  # as the node's tree starts them
        await service.start(part)
    try:
        # The step at the start delivers what waited; after it only a NOTIFY, or the 10 s timer, wakes it.
        await https_receiver.receiver.wait_for(1, timeout=5)
        event_id = await write("verified")
        await https_receiver.receiver.wait_for(2, timeout=5)  # within the 10 s: woken by the NOTIFY
        request = https_receiver.receiver.received[1]
        assert request.headers["webhook-id"] == "evt_" + event_id.hex
        assert _verify(created["signing_secret"], request)["data"] == {"status": "verified"}
    finally:
        await api.parts.service.stopService()
        await api.parts.fetcher.close()
