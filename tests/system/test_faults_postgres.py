"""
PostgreSQL stopped under load: the real daemon (``twistd``) on a PostgreSQL cluster of this
test's own takes POST /emails from several clients when every process of the cluster (the
postmaster and its children) is SIGSTOPped for ``MAILSVC_FAULT_STOP_SECONDS`` (30 by default).
Its connections stay open and nothing answers on them: no error ever comes, only the deadlines.

Proven: while it is stopped, every request is answered with a 5xx in the main envelope, within
one client deadline of the database and the retries after it (never held until the HTTP request
deadline, nor until the server comes back); after SIGCONT the same daemon process recovers by itself: sends succeed
again for every client, ``/healthz`` answers 200, and mail accepted afterwards is delivered
(the delivery loop is woken through LISTEN/NOTIFY again).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import attrs
import pytest
import pytest_twisted as pt
import requests
import treq
from twisted.internet import defer, reactor
from twisted.web.client import HTTPConnectionPool

from mailsvc.store.database import DEADLINE_GRACE
from mailsvc.store.embedded import FAST_SETTINGS, EmbeddedCluster, find_bindir
from tests.helpers.drills import DOMAIN, Daemon, Store, blocking, setup_tenant, sleep
from tests.helpers.polling import async_until
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: Stops PostgreSQL for half a minute under load.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

#: Twice the bound on an answer below (a database deadline and the retries after it): requests
#: that start in the first half of the stop must all be answered before the server comes back.
STOP_SECONDS = float(os.environ.get("MAILSVC_FAULT_STOP_SECONDS", "30"))
#: Shorter than the default (15 s), so that a shorter stop (scripts/repeat-faults) still sees
#: many deadlines pass; what is tested is that they hold, not their value.
STATEMENT_TIMEOUT = 5
DATABASE_DEADLINE = STATEMENT_TIMEOUT + DEADLINE_GRACE
#: The daemon's http.request_timeout (its default), past which a request would count as hung.
REQUEST_TIMEOUT = 60
CLIENTS = 4
RECIPIENTS = "example.net"
#: Bounds on waits for conditions, so that a failure ends the test (these are no measurements).
RECOVERY_SECONDS = 90


@attrs.frozen
class Answer:
    started: float
    answered: float
    status: int
    body: object


async def _post_email(pool, url: str, key: str, number: int) -> Answer:
    started = time.monotonic()
    response = await treq.post(
        url + "/emails", pool=pool, timeout=REQUEST_TIMEOUT + 30,
        headers={"Authorization": f"Bearer {key}"},
        json={"from": f"Acme <news@{DOMAIN}>", "to": [f"r{number}@{RECIPIENTS}"],
              "subject": f"Fault test {number}", "text": "Hello."},
    )
    body = await response.json()
    return Answer(started, time.monotonic(), response.code, body)


class Load:
    """``CLIENTS`` clients posting one e-mail after another until told to stop."""

    def __init__(self, url: str, key: str):
        self.url = url
        self.key = key
        self.answers: list[list[Answer]] = [[] for _ in range(CLIENTS)]
        self.stopping = False
        self.pool = HTTPConnectionPool(reactor, persistent=False)
        self.running = defer.gatherResults(
            [defer.ensureDeferred(self._client(n)) for n in range(CLIENTS)], consumeErrors=True)

    async def _client(self, client: int) -> None:
        number = client * 1_000_000
        while not self.stopping:
            number += 1
            self.answers[client].append(await _post_email(self.pool, self.url, self.key, number))
            await sleep(0.1)

    def every_client(self, predicate) -> bool:
        return all(any(predicate(a) for a in answers) for answers in self.answers)

    async def stop(self) -> list[Answer]:
        self.stopping = True
        await self.running
        return sorted((a for answers in self.answers for a in answers), key=lambda a: a.started)


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry))
    return found


def _stop_cluster(data_dir: Path) -> list[int]:
    """SIGSTOP the postmaster, then its children (read once it is stopped: it forks no more)."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGSTOP)
    children = _children(postmaster)
    for pid in children:
        os.kill(pid, signal.SIGSTOP)
    return [postmaster, *children]


def _continue(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


@pt.ensureDeferred
async def test_requests_fail_within_their_deadline_while_postgres_is_stopped_then_recover(
        dns_server, smtp_sink):  # noqa: F811
    root = scratch_dir("mailsvc-fault-pg-")
    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir(), FAST_SETTINGS)
    await cluster.start()
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False
    daemon = Daemon(root, cluster.dsn, dns_server.address, smtp_sink.port)
    daemon.env.update(MAILSVC_DATABASE_STATEMENT_TIMEOUT=str(STATEMENT_TIMEOUT),
                      MAILSVC_HTTP_REQUEST_TIMEOUT=str(REQUEST_TIMEOUT))
    store = None
    stopped: list[int] = []
    load = None
    passed = False
    try:
        daemon.start()
        await daemon.ready()
        pid = daemon.process.pid
        store = Store(cluster.dsn)
        key = await blocking(setup_tenant, daemon, store)

        # 1. Under load, every client's sends succeed.
        load = Load(daemon.url, key)
        await async_until(lambda: load.every_client(lambda a: a.status == 200), RECOVERY_SECONDS,
                          "every client's first sends succeeding", interval=0.1)

        # 2. Every process of the cluster stopped mid-load, then continued.
        stopped = await blocking(_stop_cluster, cluster.data_dir)
        stopped_at = time.monotonic()
        await sleep(STOP_SECONDS)
        _continue(stopped)
        continued_at = time.monotonic()
        stopped = []

        # 3. Recovered without a restart: every client's sends succeed again.
        await async_until(lambda: load.every_client(lambda a: a.started > continued_at and a.status == 200),
                          RECOVERY_SECONDS, "every client's sends succeeding again after SIGCONT", interval=0.1)
        answers = await load.stop()
        load = None
        assert daemon.alive() and daemon.process.pid == pid

        # While it was stopped: 5xx in the main envelope, each within a few database deadlines.
        bound = DATABASE_DEADLINE + 5  # a missed deadline, then the retries of a dead connection
        during = [a for a in answers if stopped_at < a.started and a.answered < continued_at]
        assert during, "no request was answered while PostgreSQL was stopped"
        for answer in during:
            assert answer.status >= 500 and set(answer.body) == {"statusCode", "name", "message"}, answer
            assert answer.body["statusCode"] == answer.status and "timed out" not in answer.body["message"], answer
        in_time = [a for a in answers if a.answered > stopped_at and a.started < continued_at - bound]
        assert all(a.answered - a.started < bound for a in in_time), [a for a in in_time
                                                                      if a.answered - a.started >= bound]
        assert all(a.answered - a.started < REQUEST_TIMEOUT for a in answers)

        # /healthz is good, and mail accepted now is delivered (the loops woke through LISTEN).
        health = await blocking(requests.get, daemon.url + "/healthz", timeout=REQUEST_TIMEOUT)
        assert health.status_code == 200, health.text
        pool = HTTPConnectionPool(reactor, persistent=False)
        after = [await _post_email(pool, daemon.url, key, 9_000_000 + n) for n in range(5)]
        assert [a.status for a in after] == [200] * 5, after
        ids = [a.body["id"] for a in after]
        delivered = "SELECT count(*) FROM deliveries WHERE email_id = ANY(%s::uuid[]) AND status = 'delivered'"
        await async_until(lambda: store.count(delivered, (ids,)) == len(ids), RECOVERY_SECONDS,
                          "the mail accepted after the stop delivered", interval=0.1)
        listening = store.count("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%%'")
        assert listening >= 1
        failed = [a for a in answers if a.status != 200]
        recovered = min(a.answered for a in answers if a.started > continued_at and a.status == 200)
        print(f"stopped {STOP_SECONDS:g} s: {len(answers)} requests, {len(failed)} failed"
              f" (slowest in {max(a.answered - a.started for a in failed):.1f} s),"
              f" first success {recovered - continued_at:.1f} s after SIGCONT")
        passed = True
    finally:
        _continue(stopped)
        if load is not None:
            load.stopping = True
        if daemon.alive():
            daemon.kill()
        if store is not None:
            store.conn.close()
        await blocking(cluster.crash_now)
        if passed:
            shutil.rmtree(root, ignore_errors=True)  # kept for a look when the test failed
