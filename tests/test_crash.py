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
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg2
import pytest
import pytest_twisted as pt
import requests
from twisted.internet import reactor, task, threads

from mailsvc.store.embedded import FAST_SETTINGS, EmbeddedCluster, find_bindir
from tests.smtpsink import smtp_sink  # noqa: F401 (a fixture)
from tests.test_daemon import free_port

#: Kills and restarts daemons and PostgreSQL: tens of seconds.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = "acme.example.com"
RECIPIENTS = "example.net"
MESSAGES = 10_000
BATCH = 100
#: 6 s: an attempt's deadline is half of it, and 1.5 s (a 3 s lease) deferred attempts that a
#: loaded machine had merely slowed, whose retry a minute later made convergence a race.
LEASE = 6
#: Everything after acceptance (deliveries, three kills, one database restart) must converge by then.
CONVERGENCE_SECONDS = 300
_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]+>)", re.IGNORECASE | re.MULTILINE)


def sleep(seconds: float):
    return task.deferLater(reactor, seconds, lambda: None)


def blocking(fn, *args, **kwargs):
    return threads.deferToThread(fn, *args, **kwargs)


class Daemon:
    """``twistd -n mailsvc`` with MAILSVC_* overrides; its output goes to a file."""

    def __init__(self, root: Path, dsn: str, dns: str, sink_port: int):
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            MAILSVC_STATE_DIR=str(root / "state"),
            MAILSVC_DATABASE_DSN=dsn,
            MAILSVC_HTTP_LISTEN=f"tcp:{self.port}:interface=127.0.0.1",
            MAILSVC_SMTP_SUBMISSION="",
            MAILSVC_SMTP_INBOUND="tcp:0:interface=127.0.0.1",
            MAILSVC_DNS_SERVERS=dns,
            MAILSVC_DELIVERY_PORT=str(sink_port),
            MAILSVC_DELIVERY_LEASE_SECONDS=str(LEASE),
            MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS="true",
            MAILSVC_MAIL_HOSTNAME="mta.mailsvc.test",
            MAILSVC_NODE_PROCESSES="2",  # a parent and two workers on any machine
        )
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, roles: str = "api,delivery,webhooks,scheduler") -> None:
        self.starts += 1
        log = open(self.root / f"daemon-{self.starts}.log", "w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "twistd"), "--nodaemon", "--pidfile=", "mailsvc"],
            env=dict(self.env, MAILSVC_NODE_ROLES=roles), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()

    async def ready(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"daemon exited; see {self.root}/daemon-{self.starts}.log"
            try:
                await blocking(requests.get, self.url + "/healthz", timeout=1)
                return
            except (requests.ConnectionError, requests.Timeout):
                # Refused, or queued on the parent's socket while its workers start.
                await sleep(0.1)
        raise AssertionError("the daemon did not listen in time")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def workers(self) -> list[int]:
        """The node's worker processes (none when ``node.processes`` is 1): the parent's children."""
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        except FileNotFoundError:
            return []
        return [int(pid) for pid in children.split()]

    def node_pids(self) -> list[int]:
        """Every process of the node, the parent first: their names (host:pid) are the claimants."""
        return [self.process.pid, *self.workers()]

    def freeze(self) -> list[int]:
        """SIGSTOP the whole node, the parent first (a stopped parent starts no new worker)."""
        self.process.send_signal(signal.SIGSTOP)
        pids = self.node_pids()
        for pid in pids[1:]:
            os.kill(pid, signal.SIGSTOP)
        return pids

    def thaw(self) -> None:
        for pid in reversed(self.node_pids()):
            os.kill(pid, signal.SIGCONT)

    async def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        await blocking(self.process.wait, 60)

    def kill(self) -> None:
        """The node dies at once, as with its machine: the parent and every worker are SIGKILLed
        (a worker whose parent alone died would stop gracefully, which is no crash)."""
        pids = self.freeze()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.process.wait()
        for pid in pids[1:]:
            while Path(f"/proc/{pid}").exists() and _state(pid) not in ("Z", "X"):
                time.sleep(0.01)


class Store:
    """The test's own view of the database (autocommit, blocking; called through threads)."""

    def __init__(self, dsn: str):
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True

    def rows(self, sql: str, args=()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def count(self, sql: str, args=()) -> int:
        return self.rows(sql, args)[0][0]

    def quiet(self, seconds: float = 10) -> None:
        """
        Until no other client backend is executing a statement (a stopped client sends none).
        Two waits count as quiet, since neither ends while the client is stopped: sending rows
        to it (``ClientWrite``: its socket is full; the statement commits only once they are
        all sent), and waiting for a lock (the chain of waits ends at a running statement,
        still counted, or at a transaction of the stopped client between two statements).
        """
        deadline = time.monotonic() + seconds
        busy = ("SELECT wait_event_type, wait_event, left(query, 80) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state = 'active'"
                " AND wait_event_type IS DISTINCT FROM 'Lock' AND wait_event IS DISTINCT FROM 'ClientWrite'")
        while running := self.rows(busy):
            assert time.monotonic() < deadline, f"the daemon's backends stayed busy after SIGSTOP: {running}"
            time.sleep(0.02)

    def claimed(self, pids: list[int]) -> set:
        """The deliveries the processes of ``pids`` hold (a process's name is host:pid, see compose.py)."""
        names = [f"{socket.gethostname()}:{pid}" for pid in pids]
        return {r[0] for r in self.rows("SELECT id FROM deliveries WHERE claim IS NOT NULL AND claimed_by = ANY(%s)",
                                        (names,))}

    def delivered(self) -> int:
        return self.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'")


def _state(pid: int) -> str:
    """A process's state letter from /proc (Z: a zombie, dead but not yet reaped by its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "X"


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


def _setup_tenant(daemon: Daemon, store: Store) -> str:
    token = (daemon.root / "state" / "operator-token").read_text().strip()
    admin = {"Authorization": f"Bearer {token}"}
    created = requests.post(daemon.url + "/admin/v1/tenants", json={"name": "Crash"}, headers=admin, timeout=10)
    assert created.status_code == 201, created.text
    tenant = created.json()
    patched = requests.patch(
        daemon.url + f"/admin/v1/tenants/{tenant['id']}", headers=admin, timeout=10,
        json={"send_rate_per_sec": 100_000, "api_rate_per_sec": 100_000,
              "daily_quota": 1_000_000, "monthly_quota": 1_000_000},
    )
    assert patched.status_code == 200, patched.text
    key = tenant["api_key"]["token"]
    domain = requests.post(daemon.url + "/domains", json={"name": DOMAIN}, timeout=10,
                           headers={"Authorization": f"Bearer {key}"})
    assert domain.status_code in (200, 201), domain.text
    # Stands in for DNS verification (tested with the domains).
    store.rows("UPDATE domains SET status = 'verified', next_check_at = now() + interval '1 day'"
               " WHERE id = %s RETURNING id", (domain.json()["id"],))
    return key


@pt.ensureDeferred
async def test_no_mail_is_lost_across_kills_and_a_database_restart(dns_server, smtp_sink):  # noqa: F811
    seed = int(os.environ.get("MAILSVC_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="mailsvc-crash-"))
    root.chmod(0o755)
    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir(), FAST_SETTINGS)
    await blocking(cluster._prepare)
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
        key = await blocking(_setup_tenant, daemon, store)
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
            while len(smtp_sink.messages) < point:
                assert daemon.alive(), f"daemon exited; see {root}/daemon-{daemon.starts}.log"
                assert time.monotonic() - started < CONVERGENCE_SECONDS, "delivery stalled before a crash point"
                await sleep(0.02)
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
                await blocking(cluster._run, "pg_ctl", "-D", str(cluster.data_dir), "-m", "fast", "-w", "stop")
                daemon.thaw()  # it now finds its connections gone
                moments.append(("database restart", held, len(smtp_sink.messages)))
                await sleep(2)
                await blocking(cluster._start_server)
                store.conn.close()
                store = Store(cluster.dsn)
            history.append(f"{moments[-1][0]} at {moments[-1][2]} received, {store.delivered()} recorded, "
                           f"{len(held)} held by the node")

        # 3. Converge: the node that lived through the database restart finishes the queue.
        survivor = daemon.process.pid
        while store.delivered() < MESSAGES:
            assert daemon.alive(), f"daemon exited; see {root}/daemon-{daemon.starts}.log"
            assert time.monotonic() - started < CONVERGENCE_SECONDS, (
                f"not converged: {store.delivered()} of {MESSAGES} delivered; {history}")
            await sleep(0.25)
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
        await blocking(cluster._run, "pg_ctl", "-D", str(cluster.data_dir), "-m", "immediate", "-w", "stop",
                       check=False)
        if passed:
            shutil.rmtree(root, ignore_errors=True)  # kept for a look when the test failed
