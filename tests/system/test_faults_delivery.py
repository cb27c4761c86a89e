"""
Delivery faults that could send one message twice: a server whose final reply comes after the
lease, and a delivery node killed while the server holds a message's DATA. Repeat them with
``scripts/repeat-faults tests/system/test_faults_delivery.py::<test> ...``.
"""
# ruff: noqa: F811 (the tests take the smtp_sink fixture imported below)

from __future__ import annotations

from collections import Counter

import pytest
import pytest_twisted as pt

from tests.helpers.drills import DOMAIN, Daemon, Store, blocking, setup_tenant
from tests.helpers.polling import async_until
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: Nodes, leases that must run out, a daemon killed and started again: tens of seconds.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

RECIPIENTS = "example.net"


async def all_settled(nodes, count: int) -> list[dict]:
    """The deliveries once ``count`` of them exist and none is queued (every node settled)."""
    for _ in range(200):
        for node in nodes:
            await node.settled()
        rows = await nodes[0].parts.db.fetchall(
            "SELECT id, recipient, status, attempts, last_response FROM deliveries ORDER BY recipient")
        if len(rows) == count and all(r["status"] != "queued" for r in rows):
            return rows
    raise AssertionError(f"deliveries still queued: {rows}")


@pt.ensureDeferred
async def test_a_final_reply_later_than_the_lease_leaves_one_copy(start_mta_with):
    """
    Two nodes on a 4 s lease; the server holds the final reply of the first message for 12 s
    (past the lease and the other node's next look at the queue). Its node gives up at its
    deadline (half the lease) by dropping the connection, so the server never takes that
    copy; the retry sends it once.
    """
    nodes = [await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS="4") for _ in range(2)]
    first = nodes[0]
    first.route(RECIPIENTS)
    first.sink.final_delays = [12]
    _, key = await first.sender()
    code, sent, _ = await first.json("POST", "/emails/batch", key, json=[
        {"from": f"Acme <news@{DOMAIN}>", "to": [f"u{i}@{RECIPIENTS}"], "subject": f"m{i}", "text": "hi"}
        for i in range(10)])
    assert code == 200, sent

    rows = await all_settled(nodes, 10)
    (late,) = [r for r in rows if r["status"] == "deferred"]
    assert "deadline passed" in late["last_response"]
    await first.sink.until(lambda: first.sink.replies_waiting == 0)  # the held reply is never sent
    await first.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE id = %s", (late["id"],))
    for node in nodes:
        node.parts.delivery.wake()
    await first.sink.wait_for(10, timeout=30)
    rows = await all_settled(nodes, 10)

    received = Counter(r for m in first.sink.messages for r in m.rcpt_to)
    assert received == Counter({f"u{i}@{RECIPIENTS}": 1 for i in range(10)})
    assert {r["status"] for r in rows} == {"delivered"}
    assert {r["recipient"]: r["attempts"] for r in rows if r["attempts"] != 1} == {late["recipient"]: 2}
    delivered = await first.events("email.delivered")
    assert sorted(e["recipient"] for e in delivered) == sorted(received)


def _accept(url: str, key: str, count: int) -> None:
    import requests

    body = [{"from": f"Acme <news@{DOMAIN}>", "to": [f"r{n}@{RECIPIENTS}"], "subject": f"Fault test {n}",
             "text": f"Message number {n}."} for n in range(count)]
    reply = requests.post(url + "/emails/batch", json=body, timeout=60, headers={"Authorization": f"Bearer {key}"})
    assert reply.status_code == 200, reply.text


@pt.ensureDeferred
async def test_a_node_killed_mid_data_duplicates_only_the_message_in_flight(fresh_dsn, dns_server, smtp_sink,
                                                                            tmp_path):
    """
    The real daemon on a 10 s lease sends 30 messages one transaction at a time to a server
    that, like an MTA that commits before it answers (RFC 1047), takes each message at its end
    of data. The 10th message's final reply is held; the node is SIGKILLed while it waits
    for it (its nine predecessors recorded as delivered). A new node takes the rest once the
    leases have run out: the message in flight arrives twice (its node never heard the
    reply), every other one exactly once, and each delivery has one outcome.
    """
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False  # what is tested is the queue, not TLS
    smtp_sink.commit_at_end_of_data = True
    smtp_sink.final_delays = [0] * 9 + [3600]
    daemon = Daemon(tmp_path, fresh_dsn, dns_server.address, smtp_sink.port)
    daemon.env.update(MAILSVC_DELIVERY_LEASE_SECONDS="10", MAILSVC_DELIVERY_PER_DESTINATION="1",
                      MAILSVC_DELIVERY_MAX_IN_FLIGHT="5")
    store = None
    try:
        daemon.start()
        await daemon.ready()
        store = Store(fresh_dsn)
        key = await blocking(setup_tenant, daemon, store)
        await blocking(_accept, daemon.url, key, 30)

        await smtp_sink.wait_for_data_ends(10, timeout=60)
        await async_until(lambda: blocking(lambda: store.delivered() == 9), 30, "the first nine outcomes recorded")
        daemon.kill()
        assert len(smtp_sink.messages) == 10 and smtp_sink.data_ends == 10
        (in_flight,) = smtp_sink.messages[-1].rcpt_to

        daemon.start()  # another node (another pid); it waits for the dead node's leases to end
        await daemon.ready()
        await async_until(lambda: blocking(lambda: store.delivered() == 30), 90, "the queue converging after the kill")
        await daemon.terminate()

        received = Counter(r for m in smtp_sink.messages for r in m.rcpt_to)
        assert received == Counter({**{f"r{n}@{RECIPIENTS}": 1 for n in range(30)}, in_flight: 2})
        assert store.rows("SELECT status, count(*) FROM deliveries GROUP BY status") == [("delivered", 30)]
        events = store.rows("SELECT data->>'delivery_id' FROM events WHERE type = 'email.delivered'")
        assert len(events) == len(set(events)) == 30
    finally:
        if daemon.alive():
            daemon.kill()
        if store is not None:
            store.conn.close()
