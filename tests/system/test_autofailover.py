"""
The failover drill with pg_auto_failover (docs/operations.md, "Failover drill"): the
promotion is pg_auto_failover's, not the test's.

A monitor and two data nodes are made with ``pg_autoctl`` (Debian's ``pg-auto-failover-cli``
and ``postgresql-15-auto-failover``) on loopback ports, as the ``postgres`` user (its socket
directory is Debian's ``/var/run/postgresql``), ``--auth trust --no-ssl`` on loopback. The
second node joins as a synchronous standby (``ANY 1 (pgautofailover_standby_2)``). Two
nodes of mailsvc (``twistd mailsvc``, every role, one process each) use the URI that
``pg_autoctl show uri --formation default`` prints, with ``user=mailsvc`` added, and deliver
to the in-process SMTP sink. Under load (tests/helpers/failover_load.py) the primary's ``pg_autoctl``
and PostgreSQL are killed at once (SIGKILL, as when the machine dies); the standby is read
(the deliveries in flight) and the test waits for the monitor to promote it, with two of the
monitor's timeouts shortened (``MONITOR_TIMEOUTS``). Then, as in tests/system/test_failover.py, every e-mail a node
answered 200 for must be delivered and at the sink at least once.

In the slow tier (about 55 s, 20 s of it the monitor's timeouts); scripts/setup.sh installs
the packages with the test tools, and ``scripts/autofailover-drill -n N`` repeats it with the
monitor's defaults (a 50 s outage, about 85 s a run).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg2
import pytest
import pytest_twisted as pt

from mailsvc.store.embedded import find_bindir
from tests.helpers.daemon import free_port
from tests.helpers.drills import RECIPIENTS, Daemon, Store, blocking, sleep
from tests.helpers.failover_load import Load, caught_up, converge, none_lost, two_nodes
from tests.helpers.polling import until
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: A formation, two nodes, a 20 s outage: about 55 s.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

LEASE = 10
LOAD_BEFORE = 5
LOAD_AFTER = 10
#: pg_auto_failover's defaults are 20 s until the primary counts as unhealthy, then 30 s for it
#: to demote itself before the standby may take writes (docs/operations.md). The drill waits
#: 10 s for each: an outage still longer than the lease, so that outcomes come after leases ran out;
#: MAILSVC_AUTOFAILOVER_DEFAULTS=1 (scripts/autofailover-drill) keeps the defaults.
MONITOR_TIMEOUTS = {} if os.environ.get("MAILSVC_AUTOFAILOVER_DEFAULTS") == "1" else {
    "pgautofailover.node_considered_unhealthy_timeout": "10s", "pgautofailover.primary_demote_timeout": "10s"}
PROMOTION_SECONDS = 120
CONVERGENCE_SECONDS = 120
STANDBY_NAMES = "ANY 1 (pgautofailover_standby_2)"


def descendants(pid: int) -> list[int]:
    """The processes started under ``pid``, children first."""
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []
    return [d for c in children for d in (c, *descendants(c))]


class Formation:
    """A pg_auto_failover monitor and its data nodes under ``root``, each ``pg_autoctl ... --run``."""

    def __init__(self, root: Path):
        self.root = root
        self.owner = pwd.getpwnam("postgres")
        root.mkdir(mode=0o700)
        os.chown(root, self.owner.pw_uid, self.owner.pw_gid)
        self.monitor_port = free_port()
        self.ports: dict[str, int] = {}
        self.keepers: dict[str, subprocess.Popen] = {}
        # Config and state of pg_autoctl (XDG directories) stay in the drill's directory.
        self.env = dict(os.environ, HOME=str(root), XDG_CONFIG_HOME=str(root / "config"),
                        XDG_DATA_HOME=str(root / "share"), XDG_RUNTIME_DIR=str(root / "run"),
                        PATH=f"{find_bindir()}:{os.environ['PATH']}", LC_ALL="C.UTF-8")

    def _as_owner(self) -> dict:
        return {"user": self.owner.pw_uid, "group": self.owner.pw_gid, "extra_groups": [], "cwd": self.root,
                "env": self.env}

    def autoctl(self, *args: str) -> str:
        done = subprocess.run(["pg_autoctl", *args], capture_output=True, text=True, **self._as_owner())
        assert done.returncode == 0, f"pg_autoctl {args[0]} failed: {done.stderr}"
        return done.stdout

    def _run(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "w")
        self.keepers[name] = subprocess.Popen(["pg_autoctl", "create", *args, "--pgdata", str(self.root / name),
                                               "--listen", "127.0.0.1", "--hostname", "127.0.0.1",
                                               "--auth", "trust", "--no-ssl", "--run"],
                                              stdout=log, stderr=subprocess.STDOUT, **self._as_owner())
        log.close()

    def start_monitor(self) -> None:
        self._run("monitor", "monitor", "--pgport", str(self.monitor_port))
        self.wait(lambda: self.states() is not None, "the monitor started")
        if MONITOR_TIMEOUTS:
            self._set_monitor(MONITOR_TIMEOUTS)

    def _set_monitor(self, settings: dict[str, str]) -> None:
        """ALTER SYSTEM on the monitor (trusted on loopback), in force once its settings are reloaded."""
        conn = psycopg2.connect(host="127.0.0.1", port=self.monitor_port, dbname="pg_auto_failover", user="postgres")
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                for name, value in settings.items():
                    cur.execute(f"ALTER SYSTEM SET {name} = %s", (value,))
                cur.execute("SELECT pg_reload_conf()")

                def in_force() -> bool:
                    for name, value in settings.items():
                        cur.execute(f"SHOW {name}")
                        if cur.fetchone()[0] != value:
                            return False
                    return True

                until(in_force, 10, f"the monitor's settings {settings} in force")
        finally:
            conn.close()

    def add_node(self, name: str) -> None:
        self.ports[name] = free_port()
        monitor = f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=prefer"
        self._run(name, "postgres", "--pgport", str(self.ports[name]), "--name", name, "--monitor", monitor,
                  "--dbname", "mailsvc")

    def states(self) -> dict[str, tuple[str, str]] | None:
        """Each node's (reported, assigned) state on the monitor; None while it does not answer."""
        try:
            conn = psycopg2.connect(host="127.0.0.1", port=self.monitor_port, dbname="pg_auto_failover",
                                    user="autoctl_node", connect_timeout=2)
        except psycopg2.OperationalError:
            return None
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node")
                return {r[0]: (r[1], r[2]) for r in cur.fetchall()}
        except psycopg2.Error:
            return None
        finally:
            conn.close()

    def state_of(self, name: str) -> tuple[str, str] | None:
        return (self.states() or {}).get(name)

    def wait(self, condition, what: str, seconds: float = 120, meanwhile=None) -> float:
        """Polls ``condition`` until it holds (``meanwhile`` run between looks); the seconds it took."""
        began = time.monotonic()

        def holds() -> bool:
            if condition():
                return True
            for name, keeper in self.keepers.items():
                assert keeper.poll() is None, f"pg_autoctl of {name} exited; see {self.root / name}.log"
            if meanwhile is not None:
                meanwhile()
            return False

        until(holds, seconds, lambda: f"{what}: {self.states()}", interval=0.5)
        return time.monotonic() - began

    def sql(self, name: str, statement: str, dbname: str = "mailsvc") -> list[tuple]:
        conn = psycopg2.connect(host="127.0.0.1", port=self.ports[name], dbname=dbname, user="postgres")
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def hurry_checkpoint(self) -> None:
        """A standby joining waits for a spread checkpoint on node1 (minutes); CHECKPOINT ends it.
        The primary may be reloading its settings for the standby meanwhile: a refusal is let go."""
        try:
            self.sql("node1", "CHECKPOINT")
        except psycopg2.OperationalError:
            pass

    def kill(self, name: str) -> None:
        """The node's machine dies: its pg_autoctl and every process under it (PostgreSQL too)
        stopped first, so none reacts, then SIGKILLed."""
        keeper = self.keepers.pop(name)
        pids = [keeper.pid, *descendants(keeper.pid)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        keeper.wait()

    def stop(self) -> None:
        """Stops every pg_autoctl still running (each stops its PostgreSQL), by pid."""
        for keeper in self.keepers.values():
            keeper.send_signal(signal.SIGTERM)
        for keeper in self.keepers.values():
            try:
                keeper.wait(30)
            except subprocess.TimeoutExpired:  # a pg_autoctl still retrying: stop it and its postgres
                for pid in [keeper.pid, *descendants(keeper.pid)]:
                    os.kill(pid, signal.SIGKILL)
                keeper.wait()
        self.keepers.clear()


@pt.ensureDeferred
async def test_no_accepted_mail_is_lost_when_pg_auto_failover_promotes_the_standby(dns_server, smtp_sink):  # noqa: F811
    root = scratch_dir("mailsvc-autofailover-")
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False
    formation = Formation(root / "pg")
    daemons: list[Daemon] = []
    load = None
    store = None
    passed = False
    history: list[str] = []
    try:
        began = time.monotonic()
        await blocking(formation.start_monitor)
        formation.add_node("node1")
        await blocking(formation.wait, lambda: formation.state_of("node1") == ("single", "single"),
                       "node1 a single primary")
        await blocking(formation.sql, "node1", "CREATE ROLE mailsvc LOGIN", "postgres")
        await blocking(formation.sql, "node1", "ALTER DATABASE mailsvc OWNER TO mailsvc", "postgres")
        formation.add_node("node2")
        await blocking(formation.wait, lambda: formation.states() == {"node1": ("primary", "primary"),
                                                                      "node2": ("secondary", "secondary")},
                       "node2 joining as a secondary",
                       meanwhile=formation.hurry_checkpoint)
        standby_names = await blocking(formation.sql, "node1", "SHOW synchronous_standby_names")
        assert standby_names == [(STANDBY_NAMES,)], standby_names
        uri = (await blocking(formation.autoctl, "show", "uri", "--formation", "default",
                              "--pgdata", str(formation.root / "monitor"))).strip()
        assert uri.startswith("postgres://127.0.0.1:") and "target_session_attrs=read-write" in uri, uri
        dsn = uri + "&user=mailsvc"
        history.append(f"formation up in {time.monotonic() - began:.1f} s; database.dsn = {dsn}")

        store, key = await two_nodes(root, dsn, dns_server, smtp_sink, LEASE, daemons)
        history.append(f"mailsvc nodes up {time.monotonic() - began:.1f} s after the start")

        load = Load([d.url for d in daemons], key)
        load.start()
        await sleep(LOAD_BEFORE)
        before = (len(load.accepted), len(smtp_sink.messages))
        failed_at = time.monotonic()
        await blocking(formation.kill, "node1")
        store.conn.close()
        standby = f"host=127.0.0.1 port={formation.ports['node2']} dbname=mailsvc user=mailsvc"
        in_flight = await blocking(caught_up, standby)
        history.append(f"node1 killed with {before[0]} accepted and {before[1]} at the sink; "
                       f"{len(in_flight)} deliveries in flight")

        def writable() -> bool:
            reported, assigned = formation.state_of("node2") or ("", "")
            return assigned in ("wait_primary", "primary") and reported == assigned

        await blocking(formation.wait, writable, "pg_auto_failover promoting node2", PROMOTION_SECONDS)
        promoted_at = time.monotonic()
        standby_names = await blocking(formation.sql, "node2", "SHOW synchronous_standby_names")
        history.append(f"node2 promoted by the monitor {promoted_at - failed_at:.1f} s after the kill: "
                       f"{formation.states()}, synchronous_standby_names {standby_names[0][0]!r}")
        await sleep(LOAD_AFTER)
        await blocking(load.stop)
        assert len(load.accepted) > before[0], "nothing was accepted after the failover"
        history.append(f"load stopped: {len(load.accepted)} accepted ({len(load.accepted) - before[0]} after the "
                       f"failover), failed requests {dict(load.failed)}")

        store = Store(dsn)
        accepted = set(load.accepted)
        assert len(accepted) == len(load.accepted)
        await converge(daemons, store, accepted, promoted_at, CONVERGENCE_SECONDS, history)
        for daemon in daemons:
            await daemon.terminate()
        none_lost(store, accepted, smtp_sink.messages, in_flight, history)
        # Why convergence took what it took: deliveries deferred (the retry schedule) by the outage.
        delayed = store.rows("SELECT data->>'message', count(*) FROM events WHERE type = 'email.delivery_delayed'"
                             " GROUP BY 1 ORDER BY 2 DESC")
        history.append(f"deferred during the failover: {delayed}")
        history.append(f"drill done in {time.monotonic() - began:.1f} s")
        print("\n".join(history))
        passed = True
    finally:
        if load is not None:
            await blocking(load.stop)
        for daemon in daemons:
            if daemon.alive():
                daemon.kill()
        if store is not None:
            store.conn.close()
        await blocking(formation.stop)
        if passed:
            shutil.rmtree(root, ignore_errors=True)  # kept for a look when the drill failed
        else:
            print("\n".join(history))
