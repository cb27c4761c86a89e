"""
Every worker of a node delivers (docs/decisions.md, "Processes of a node"), on the real daemon
with two workers: both are seen sending to the sink, the node's connections to one host stay
within ``delivery.per_destination`` between them, and a worker SIGKILLed mid-delivery loses
nothing: what it held comes back when its leases end and is delivered. A sending node (the
delivery role without api) runs its workers too. Each worker's share of the limits on a
Clock: tests/unit/test_shares.py. Nothing here stops PostgreSQL: each test's database is a
clone on the run's cluster (``fresh_dsn``), not a cluster made and migrated for it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import time
from collections import Counter

import pytest
import pytest_twisted as pt
import requests

from tests.helpers.daemon import serving_pid
from tests.helpers.drills import DOMAIN, RECIPIENTS, Daemon, Store, blocking, setup_tenant, sleep
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.alone]

MESSAGES = 2000
BATCH = 100
PER_DESTINATION = 4
#: Two connections and 20 deliveries in flight a worker: the wait for a connection stays well
#: within an attempt's deadline (half the 6 s lease). With the defaults (10 and 500 a node) a
#: loaded machine let attempts wait past it, and each deferral came back a minute later
#: (domain/policy.py's RetrySchedule): 84 s on a quiet machine, out of time on a loaded one.
LIMITS = {"MAILSVC_DELIVERY_PER_DESTINATION": str(PER_DESTINATION), "MAILSVC_DELIVERY_MAX_IN_FLIGHT": "40"}
_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]+>)", re.IGNORECASE | re.MULTILINE)


def _accept(url: str, key: str, first: int) -> list[str]:
    body = [{"from": f"Acme <news@{DOMAIN}>", "to": [f"r{n}@{RECIPIENTS}"], "subject": f"Workers {n}",
             "text": f"Message number {n}."} for n in range(first, first + BATCH)]
    reply = requests.post(url + "/emails/batch", json=body, timeout=60, headers={"Authorization": f"Bearer {key}"})
    assert reply.status_code == 200, f"batch {first}: {reply.status_code} {reply.text}"
    return [e["id"] for e in reply.json()["data"]]


def senders(sink, workers: list[int]) -> set[int]:
    """The workers holding the client side of the sink's open connections."""
    found = set()
    for port in sink.open_peer_ports:
        try:
            pid = serving_pid(port, sink.port, set(workers))
        except OSError:  # a worker gone meanwhile
            continue
        if pid is not None:
            found.add(pid)
    return found

async def both_seen_sending(daemon, store, sink, started: float, total: int) -> list[int]:
    """The daemon's two worker pids, once each was seen holding a connection to ``sink`` before
    all ``total`` messages were delivered."""
    await daemon.until(lambda: len(daemon.workers()) == 2, started + 60, "two workers")
    workers = daemon.workers()
    seen: set[int] = set()
    while seen != set(workers):
        assert store.delivered() < total, f"all delivered, only {seen} of {workers} seen sending"
        seen |= senders(sink, workers)
        await sleep(0.02)
    return workers



@pt.ensureDeferred
async def test_both_workers_deliver_within_the_nodes_limits_and_a_killed_one_loses_nothing(
        fresh_dsn, dns_server, smtp_sink):  # noqa: F811
    root = scratch_dir("mailsvc-workers-")
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False  # what is tested is who delivers, not TLS
    smtp_sink.delay = 0.001  # every reply: delivery lasts seconds, long enough to watch
    daemon = Daemon(root, fresh_dsn, dns_server.address, smtp_sink.port)
    daemon.env.update(LIMITS)
    store = None
    passed = False
    try:
        # 1. Accept everything on a node without the delivery role.
        daemon.start("api,webhooks,scheduler")
        await daemon.ready()
        store = Store(fresh_dsn)
        key = await blocking(setup_tenant, daemon, store)
        for first in range(0, MESSAGES, BATCH * 4):
            for d in [blocking(_accept, daemon.url, key, f) for f in range(first, first + BATCH * 4, BATCH)]:
                await d
        await daemon.terminate()

        # 2. A node of two workers delivers: both are seen sending.
        daemon.start()
        started = time.monotonic()
        await daemon.ready()
        workers = await both_seen_sending(daemon, store, smtp_sink, started, MESSAGES)

        # 3. The second worker, holding deliveries, is killed: stopped first, so that what it
        # holds is read exactly (a statement it had sent ends meanwhile; a transaction it had
        # open is rolled back when it dies).
        victim = workers[1]
        name = f"{socket.gethostname()}:{victim}"
        held: set = set()
        while not held:
            await daemon.until(lambda: store.claimed([victim]), started + 120, "the second worker holding deliveries",
                               interval=0.01)
            os.kill(victim, signal.SIGSTOP)
            await sleep(0.5)
            held = await blocking(store.claimed, [victim])
            if not held:
                os.kill(victim, signal.SIGCONT)
        os.kill(victim, signal.SIGKILL)
        killed_at = len(smtp_sink.messages)

        # 4. Nothing lost: its leases end, the node delivers what it held, every message arrives.
        await daemon.until(lambda: store.delivered() >= MESSAGES, started + 300,
                           lambda: f"{store.delivered()} of {MESSAGES} delivered", interval=0.25)
        await daemon.terminate()
        statuses = dict(store.rows("SELECT status, count(*) FROM deliveries GROUP BY status"))
        assert statuses == {"delivered": MESSAGES}, statuses
        assert not store.rows("SELECT 1 FROM deliveries WHERE claimed_by = %s", (name,))
        message_ids = {mid for (mid,) in store.rows("SELECT message_id FROM emails")}
        received = Counter(_MESSAGE_ID.search(m.data.split(b"\r\n\r\n", 1)[0]).group(1).decode()
                           for m in smtp_sink.messages)
        assert set(received) == message_ids
        # At most what it held arrived twice (those whose reply it never read).
        assert sum(received.values()) - MESSAGES <= len(held)
        events = store.rows("SELECT data->>'delivery_id' FROM events WHERE type = 'email.delivered'")
        assert len(events) == MESSAGES == len(set(events))
        # The node's connections to the one host stayed within its limit, each worker with half.
        assert smtp_sink.max_concurrent <= PER_DESTINATION
        print(f"{len(held)} held by the killed worker at {killed_at} received; "
              f"{sum(received.values()) - MESSAGES} extra copies; {time.monotonic() - started:.1f} s")
        passed = True
    finally:
        if daemon.alive():
            daemon.kill()
        if store is not None:
            store.conn.close()
        if passed:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept for inspection: {root}")


@pt.ensureDeferred
async def test_a_node_without_the_api_role_delivers_from_every_worker(fresh_dsn, dns_server, smtp_sink):  # noqa: F811
    root = scratch_dir("mailsvc-workers-")
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False
    smtp_sink.delay = 0.001
    daemon = Daemon(root, fresh_dsn, dns_server.address, smtp_sink.port)
    daemon.env.update(LIMITS)
    store = None
    passed = False
    try:
        daemon.start("api,webhooks,scheduler")
        await daemon.ready()
        store = Store(fresh_dsn)
        key = await blocking(setup_tenant, daemon, store)
        for d in [blocking(_accept, daemon.url, key, f) for f in range(0, 1000, BATCH)]:
            await d
        await daemon.terminate()

        daemon.start("delivery")  # no HTTP: ready once its two workers run
        started = time.monotonic()
        await both_seen_sending(daemon, store, smtp_sink, started, 1000)
        await daemon.until(lambda: store.delivered() >= 1000, started + 120,
                           lambda: f"{store.delivered()} of 1000 delivered", interval=0.25)
        await daemon.terminate()
        assert dict(store.rows("SELECT status, count(*) FROM deliveries GROUP BY status")) == {"delivered": 1000}
        passed = True
    finally:
        if daemon.alive():
            daemon.kill()
        if store is not None:
            store.conn.close()
        if passed:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept for inspection: {root}")
