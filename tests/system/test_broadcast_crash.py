"""
Crash safety of the broadcast fan-out, on the real daemon (``twistd mailsvc``, a parent and two
workers, the fan-out in the first): a node with the ``broadcasts`` role is SIGKILLed (the whole
node, as when its machine dies) three times while it writes the chunks of a broadcast to a
3,000-contact segment, and started again each time. A chunk is recorded by the accept statement
of its own e-mails and only under its lease (3 s here), so what a dead node had not committed
is redone by the next one, and nothing it had committed is written again. Only the node is killed,
so its database is a clone on the run's cluster (``fresh_dsn``), not a cluster of its own.

Then a delivery node delivers everything to the in-process sink, and the count is exact: every
contact got exactly one message (its own, personalised), and the sink's count equals the
broadcast's ``recipients``. (The delivery queue's own crash safety is tests/system/test_crash.py.)
"""

from __future__ import annotations

import email
import email.policy
import os
import random
import re
import shutil
import time
from collections import Counter

import pytest
import pytest_twisted as pt
import requests

from mailsvc.config import DeliveryConfig
from tests.helpers.drills import DOMAIN, Daemon, Store, blocking, setup_tenant, sleep
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: Kills and restarts daemons: tens of seconds.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

CONTACTS = 3000
RECIPIENTS = "example.net"
LEASE = 3
CONVERGENCE_SECONDS = 240
DELIVERED = "SELECT count(*) FROM deliveries WHERE status = 'delivered'"


def _contacts(url: str, key: str) -> str:
    headers = {"Authorization": f"Bearer {key}"}
    segment = requests.post(url + "/segments", json={"name": "Everyone"}, headers=headers, timeout=10)
    assert segment.status_code == 201, segment.text
    segment_id = segment.json()["id"]
    for first in range(0, CONTACTS, 1000):
        rows = [{"email": f"c{i}@{RECIPIENTS}", "first_name": f"F{i}"} for i in range(first, first + 1000)]
        done = requests.post(url + "/contacts/batch", json={"contacts": rows, "segment_id": segment_id},
                             headers=headers, timeout=60)
        assert done.status_code == 200 and not done.json()["errors"], done.text
    return segment_id


def _broadcast(url: str, key: str, segment_id: str) -> str:
    created = requests.post(url + "/broadcasts", headers={"Authorization": f"Bearer {key}"}, timeout=10, json={
        "segment_id": segment_id, "from": f"Acme <news@{DOMAIN}>", "subject": "For {{{FIRST_NAME}}}",
        "html": "<p>Hi {{{FIRST_NAME}}}</p><a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">Unsubscribe</a>",
        "send": True})
    assert created.status_code == 200, created.text
    return created.json()["id"]


@pt.ensureDeferred
async def test_a_broadcast_killed_three_times_mid_fan_out_sends_each_contact_one_message(
        fresh_dsn, dns_server, smtp_sink):  # noqa: F811
    seed = int(os.environ.get("MAILSVC_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    root = scratch_dir("mailsvc-broadcast-crash-")
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False
    daemon = Daemon(root, fresh_dsn, dns_server.address, smtp_sink.port)
    daemon.env.update(MAILSVC_BROADCASTS_LEASE_SECONDS=str(LEASE), MAILSVC_BROADCASTS_CHUNK="100")
    store = None
    passed = False
    history = [f"seed {seed}"]
    try:
        # A node that fans out but does not deliver: what it writes stays in the queue.
        roles = "api,scheduler,broadcasts"
        daemon.start(roles)
        await daemon.ready()
        store = Store(fresh_dsn)
        key = await blocking(setup_tenant, daemon, store)
        segment_id = await blocking(_contacts, daemon.url, key)
        broadcast_id = await blocking(_broadcast, daemon.url, key, segment_id)

        def written() -> int:
            return store.count("SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = %s"
                               " AND state = 'written'", (broadcast_id,))

        def leases() -> set:
            """The leases of chunks claimed and not written yet."""
            return {row[0] for row in store.rows(
                "SELECT DISTINCT lease FROM broadcast_recipients WHERE broadcast_id = %s"
                " AND state = 'pending' AND lease IS NOT NULL", (broadcast_id,))}

        def pending(of: set) -> int:
            return store.count("SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = %s"
                               " AND state = 'pending' AND lease = ANY(%s)", (broadcast_id, list(of)))

        started = time.monotonic()
        converge_by = started + CONVERGENCE_SECONDS
        points = sorted(rng.sample(range(CONTACTS // 10, CONTACTS * 8 // 10), 3))
        dead: set = set()  # the leases of killed nodes, still on their rows until taken over
        for number, point in enumerate(points):
            await daemon.until(lambda point=point: written() >= point, converge_by,
                               "the fan-out writing up to a kill point", interval=0.01)
            await sleep(rng.uniform(0, 0.1))
            # Mid-chunk: the node stopped while a chunk it claimed is not written yet (seen in
            # the database with the node stopped, so it cannot write it before the kill).
            while True:
                await daemon.until(lambda dead=dead: leases() - dead, converge_by,
                                   "a chunk claimed by the running node", interval=0.005)
                daemon.freeze()
                await blocking(store.quiet)  # what it had sent PostgreSQL is done
                held = await blocking(leases) - dead
                if held:
                    break
                daemon.thaw()  # written between the look and the stop: look again
            daemon.kill()
            dead |= held
            history.append(f"kill {number + 1} at {await blocking(written)} written, "
                           f"{await blocking(pending, held)} claimed by it and not written")
            assert await blocking(pending, held) > 0
            daemon.start(roles)
            await daemon.ready()
        await daemon.until(
            lambda: store.count("SELECT count(*) FROM broadcasts WHERE id = %s AND status = 'sent'", (broadcast_id,)),
            converge_by, lambda: f"the broadcast sent: {written()} written; {history}", interval=0.25)
        history.append(f"sent {time.monotonic() - started:.1f} s after the send")
        await daemon.terminate()

        # Exactly one e-mail per contact was accepted, each recorded with its recipient row.
        assert written() == CONTACTS
        assert store.count("SELECT count(*) FROM emails") == CONTACTS
        assert store.count("SELECT count(DISTINCT recipient) FROM deliveries") == CONTACTS
        assert store.count("SELECT count(*) FROM deliveries") == CONTACTS
        assert store.count("SELECT sum(count) FROM usage WHERE period LIKE 'day:%%'") == CONTACTS

        # Deliver it all (no more kills): the sink gets exactly the recipients. The delivery
        # lease is the default one here: tests/system/test_crash.py's 3 s lease lets a loaded machine
        # send a delivery twice (at least once is the queue's promise; exactly once is asked here
        # of the fan-out, whose e-mails are counted above).
        # With a lease that long an attempt's deadline is far off: the default deliveries in flight.
        daemon.env.update(MAILSVC_DELIVERY_LEASE_SECONDS="300",
                          MAILSVC_DELIVERY_MAX_IN_FLIGHT=str(DeliveryConfig().max_in_flight))
        daemon.start("api,delivery")
        await daemon.ready()

        def broadcast() -> dict:
            return requests.get(f"{daemon.url}/broadcasts/{broadcast_id}", headers={"Authorization": f"Bearer {key}"},
                                timeout=10).json()

        got = await daemon.until(
            lambda: (b := broadcast())["stats"].get("delivered") == CONTACTS and b, started + CONVERGENCE_SECONDS * 2,
            lambda: f"every recipient delivered: {store.count(DELIVERED)} of {CONTACTS}",
            interval=0.25)
        await daemon.terminate()
        assert got["status"] == "sent" and got["recipients"] == CONTACTS == len(smtp_sink.messages)
        assert got["stats"]["delivered"] == CONTACTS
        per_address = Counter(m.rcpt_to[0] for m in smtp_sink.messages)
        assert per_address == Counter({f"c{i}@{RECIPIENTS}": 1 for i in range(CONTACTS)})
        for message in smtp_sink.messages:
            parsed = email.message_from_bytes(message.data, policy=email.policy.default)
            i = re.match(r"c(\d+)@", message.rcpt_to[0]).group(1)
            assert parsed["Subject"] == f"For F{i}"
        print("\n".join(history))
        passed = True
    finally:
        if daemon.alive():
            daemon.kill()
        if store is not None:
            store.conn.close()
        if passed:
            shutil.rmtree(root, ignore_errors=True)
