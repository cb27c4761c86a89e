"""
The crash and fault drills' harness: the real daemon (a parent and workers) started and killed on an
embedded cluster, a blocking view of its database, and a tenant made through the operator API.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import requests
from twisted.internet import reactor, task, threads

from tests.helpers.daemon import ROOT, free_port
from tests.helpers.polling import async_until, until

DOMAIN = "acme.example.com"
RECIPIENTS = "example.net"
#: 6 s: an attempt's deadline is half of it, and 1.5 s (a 3 s lease) deferred attempts that a
#: loaded machine had merely slowed, whose retry a minute later made convergence a race.
LEASE = 6
#: Deliveries a node holds at most: 10 waiting for each of its 10 connections to a host (the
#: default's 500 are 50 each), so that the wait for one stays within an attempt's deadline (half
#: the lease) on a loaded machine. With the default, the crash drill at a load of 10 to 15 deferred
#: 454 attempts past their deadline and had not reached its last crash point after 280 s.
MAX_IN_FLIGHT = 100
#: Seconds before a deferred delivery's first retry (``delivery.test_first_retry_seconds``): an
#: attempt a loaded machine slowed past its deadline is tried again in seconds, not a minute on.
FIRST_RETRY = 3


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
            MAILSVC_DELIVERY_MAX_IN_FLIGHT=str(MAX_IN_FLIGHT),
            MAILSVC_DELIVERY_TEST_FIRST_RETRY_SECONDS=str(FIRST_RETRY),
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
        """Until the node answers ``/healthz``; fails at once if it exits meanwhile."""
        async def answers() -> bool:
            assert self.process.poll() is None, f"daemon exited; see {self.root}/daemon-{self.starts}.log"
            try:
                await blocking(requests.get, self.url + "/healthz", timeout=1)
                return True
            except (requests.ConnectionError, requests.Timeout):
                return False  # refused, or queued on the parent's socket while its workers start

        await async_until(answers, seconds, "the daemon answering /healthz", interval=0.1)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def until(self, condition, deadline: float, what, interval: float = 0.1):
        """``condition()``'s first true value (run in a thread: it may query the database), before
        the monotonic ``deadline``; fails at once, naming the node's log, if the node exits."""
        def holds():
            assert self.alive(), f"daemon exited; see {self.root}/daemon-{self.starts}.log"
            return condition()

        return await async_until(lambda: blocking(holds), deadline - time.monotonic(), what, interval=interval)

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
        until(lambda: all(not Path(f"/proc/{pid}").exists() or _state(pid) in ("Z", "X") for pid in pids[1:]),
              10, "the killed workers gone", interval=0.01)


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
        Until no other client backend of this database is executing a statement (a stopped client
        sends none; the run's cluster may hold other tests' databases).
        Two waits count as quiet, since neither ends while the client is stopped: sending rows
        to it (``ClientWrite``: its socket is full; the statement commits only once they are
        all sent), and waiting for a lock (the chain of waits ends at a running statement,
        still counted, or at a transaction of the stopped client between two statements).
        """
        busy = ("SELECT wait_event_type, wait_event, left(query, 80) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state = 'active'"
                " AND datname = current_database()"
                " AND wait_event_type IS DISTINCT FROM 'Lock' AND wait_event IS DISTINCT FROM 'ClientWrite'")
        until(lambda: not self.rows(busy), seconds,
              lambda: f"the daemon's backends idle after SIGSTOP: {self.rows(busy)}", interval=0.02)

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


def setup_tenant(daemon: Daemon, store: Store) -> str:
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
