"""
Crash safety of the delivery queue, on the real daemon: 10,000 accepted messages all reach the
sink although the daemon is SIGKILLed three times mid-delivery and PostgreSQL is restarted once
under it (the node that lived through the restart reconnects and finishes the queue).

The daemon runs under ``twistd`` on a PostgreSQL cluster of this test's own (so restarting it
disturbs no other test), with a 6 s lease, resolving through the loopback DNS server (MX of
the recipients' domain → 127.0.0.1) and delivering to the in-process SMTP sink, which counts
what it accepted per Message-ID. ``MAILSVC_CRASH_SEED`` replays the random crash points.

The daemon runs as a node does by default on two cores: a parent and two workers, the first
one delivering. A kill is of the whole node (parent and workers, as when its machine dies).

How the set of deliveries a node held is taken exactly: the node is first SIGSTOPped, then
the test waits until none of the cluster's client backends is executing a statement; from then
on nothing commits on the daemon's behalf (a transaction it had open is rolled back when it
dies or when the server stops), so the rows with a claim in one of its names (host:pid) read at that
point are what it held when it was killed (or when PostgreSQL went away). A delivery is "in
doubt" at such a moment if it was held and its message had already reached the sink. Proven
afterwards: every delivery delivered, every Message-ID at the sink, exactly one
``email.delivered`` event per delivery; each extra copy at the sink belongs to a delivery in
doubt at one of the four moments (at most one extra copy per such moment) or to an attempt
deferred after its end of data (one per deferral), and every delivery in doubt at a kill was
indeed sent again.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
import uuid
from collections import Counter

import pytest
import pytest_twisted as pt
import requests
from twisted.internet import reactor

from mailsvc.store.embedded import FAST_SETTINGS, EmbeddedCluster, find_bindir
from tests.helpers.drills import DOMAIN, RECIPIENTS, Daemon, Store, blocking, setup_tenant, sleep
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: Kills and restarts daemons and PostgreSQL: tens of seconds.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

MESSAGES = 10_000
BATCH = 100
#: Everything after acceptance (deliveries, three kills, one database restart) must converge by then.
CONVERGENCE_SECONDS = 300
_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]+>)", re.IGNORECASE | re.MULTILINE)


def frozen_claims(daemon: Daemon, store: Store) -> set:
    """SIGSTOP the node and read the deliveries it holds (see the module's docstring)."""
    pids = daemon.freeze()
    store.quiet()
    return store.claimed(pids)


def _accept(url: str, key: str, first: int) -> list[str]:
    body = [{"from": f"Acme <news@{DOMAIN}>", "to": [f"r{n}@{RECIPIENTS}"], "subject": f"Crash test {n}",
             "text": f"Message number {n}."} for n in range(first, first + BATCH)]
    reply = requests.post(url + "/emails/batch", json=body, timeout=60, headers={"Authorization": f"Bearer {key}"})
    assert reply.status_code == 200, f"batch {first}: {reply.status_code} {reply.text}"
    return [e["id"] for e in reply.json()["data"]]


@pt.ensureDeferred
async def test_no_mail_is_lost_across_kills_and_a_database_restart(dns_server, smtp_sink):  # noqa: F811
    seed = int(os.environ.get("MAILSVC_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    root = scratch_dir("mailsvc-crash-")
    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir(), FAST_SETTINGS)
    await cluster.start()
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False  # what is tested is the queue, not TLS
    daemon = Daemon(root, cluster.dsn, dns_server.address, smtp_sink.port)
    store = None
    passed = False
    history: list[str] = [f"seed {seed}"]
    try:
        # 1. Accept everything on a node without the delivery role.
        began = time.monotonic()
        daemon.start("api,webhooks,scheduler")
        await daemon.ready()
        store = Store(cluster.dsn)
        key = await blocking(setup_tenant, daemon, store)
        email_ids: list[str] = []
        for first in range(0, MESSAGES, BATCH * 4):
            batches = [blocking(_accept, daemon.url, key, f) for f in range(first, min(first + BATCH * 4, MESSAGES),
                                                                           BATCH)]
            for d in batches:
                email_ids += await d
        assert len(set(email_ids)) == MESSAGES
        assert store.count("SELECT count(*) FROM deliveries WHERE status = 'queued'") == MESSAGES
        await daemon.terminate()
        assert smtp_sink.messages == []

        # 2. Deliver, with three SIGKILLs and one PostgreSQL restart at random points.
        history.append(f"accepted {MESSAGES} in {time.monotonic() - began:.1f} s")
        points = sorted(rng.sample(range(MESSAGES // 20, MESSAGES * 3 // 4), 4))
        # Per moment: the deliveries the node held, and how many messages the sink had by then.
        moments: list[tuple[str, set, int]] = []
        daemon.start()
        started = time.monotonic()
        await daemon.ready()
        for number, point in enumerate(points):
            await daemon.until(lambda point=point: len(smtp_sink.messages) >= point, started + CONVERGENCE_SECONDS,
                               "delivery reaching a crash point", interval=0.02)
            await sleep(rng.uniform(0, 0.2))
            held = await blocking(frozen_claims, daemon, store)
            if number < 3:
                daemon.kill()
                # What the dead node had written reaches the sink before its connections close
                # (however loaded the machine, which a fixed wait was not).
                await smtp_sink.until(lambda: smtp_sink.open_connections == 0, 30)
                moments.append((f"kill {number + 1}", held, len(smtp_sink.messages)))
                daemon.start()
                await daemon.ready()  # a node that cannot reach its database at start exits (by design)
            else:
                await cluster.stop()
                daemon.thaw()  # it now finds its connections gone
                moments.append(("database restart", held, len(smtp_sink.messages)))
                await sleep(2)
                await cluster.start()
                store.conn.close()
                store = Store(cluster.dsn)
            history.append(f"{moments[-1][0]} at {moments[-1][2]} received, {store.delivered()} recorded, "
                           f"{len(held)} held by the node")

        # 3. Converge: the node that lived through the database restart finishes the queue.
        survivor = daemon.process.pid
        await daemon.until(lambda: store.delivered() >= MESSAGES, started + CONVERGENCE_SECONDS,
                           lambda: f"convergence: {store.delivered()} of {MESSAGES} delivered; {history}",
                           interval=0.25)
        assert daemon.process.pid == survivor and daemon.alive()
        await daemon.terminate()  # lets any transaction still in flight end before counting
        history.append(f"converged {time.monotonic() - started:.1f} s after delivery began")

        # 4. None lost: every delivery delivered, every Message-ID at the sink.
        statuses = dict(store.rows("SELECT status, count(*) FROM deliveries GROUP BY status"))
        assert statuses == {"delivered": MESSAGES}, statuses
        message_ids = dict(store.rows("SELECT message_id, d.id FROM emails e JOIN deliveries d ON d.email_id = e.id"))
        assert len(message_ids) == MESSAGES
        received: Counter = Counter()
        for message in smtp_sink.messages:
            found = _MESSAGE_ID.search(message.data.split(b"\r\n\r\n", 1)[0])
            assert found is not None
            received[found.group(1).decode()] += 1
        assert set(received) == set(message_ids), "a message is missing, or one arrived that was never accepted"
        # Exactly one outcome per delivery was written (the lease fences every other attempt).
        events = store.rows("SELECT data->>'delivery_id' FROM events WHERE type = 'email.delivered'")
        assert len(events) == MESSAGES and len(set(events)) == MESSAGES

        # 5. Duplicates. A delivery can reach the sink twice only if a node held it at one of the
        # four moments and its message had reached the sink by then (its outcome unwritten).
        first_seen: dict[str, int] = {}
        for index, message in enumerate(smtp_sink.messages):
            mid = _MESSAGE_ID.search(message.data.split(b"\r\n\r\n", 1)[0]).group(1).decode()
            first_seen.setdefault(mid, index)
        delivery_of = message_ids
        in_doubt: Counter = Counter()
        for name, held, received_by in moments:
            doubtful = {delivery_of[mid] for mid, index in first_seen.items() if index < received_by} & held
            in_doubt.update(doubtful)
            history.append(f"{name}: {len(doubtful)} of the {len(held)} held had reached the sink")
        # An attempt deferred after its end of data (its deadline passed while the final reply
        # was awaited, RFC 1047) may have left a copy at the sink too: one per deferral.
        deferrals = store.rows("SELECT data->>'delivery_id' FROM events WHERE type = 'email.delivery_delayed'")
        in_doubt.update(uuid.UUID(delivery_id) for (delivery_id,) in deferrals)
        duplicates = {delivery_of[mid]: n - 1 for mid, n in received.items() if n > 1}
        for delivery_id, extra in duplicates.items():
            copies = [index for index, message in enumerate(smtp_sink.messages)
                      if delivery_of[_MESSAGE_ID.search(message.data.split(b"\r\n\r\n", 1)[0]).group(1).decode()]
                      == delivery_id]
            held_at = [(name, received_by) for name, held, received_by in moments if delivery_id in held]
            assert extra <= in_doubt[delivery_id], (
                f"delivery {delivery_id} arrived {extra + 1} times (sink positions {copies}), in doubt at"
                f" {in_doubt[delivery_id]} moments; held at (moment, received by then): {held_at}", history)
        # And the other way round: a delivery in doubt at a kill had no outcome written and its
        # lease named a dead node, so it was sent again (after a database restart, the living
        # node usually writes the outcome it kept, and no second copy is needed).
        for name, held, received_by in moments[:3]:
            doubtful = {delivery_of[mid] for mid, index in first_seen.items() if index < received_by} & held
            assert doubtful <= set(duplicates), (name, history)
        history.append(f"{len(duplicates)} deliveries arrived twice ({sum(duplicates.values())} extra copies);"
                       f" {len(in_doubt)} were in doubt at the four moments")
        print("\n".join(history))
        passed = True
    finally:
        if daemon.alive():
            daemon.thaw()
            daemon.kill()
        if store is not None:
            store.conn.close()
        await blocking(cluster.crash_now)
        if passed:
            shutil.rmtree(root, ignore_errors=True)  # kept for a look when the test failed
