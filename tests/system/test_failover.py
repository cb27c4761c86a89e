"""
A PostgreSQL failover under load, on real daemons: no accepted e-mail is lost.

The test builds its own pair of clusters on loopback ports, run as the ``mailsvc`` system
user as the embedded store runs its own: a primary, and a synchronous streaming replica made
with ``pg_basebackup -R`` (``synchronous_standby_names`` names it, so a commit is answered
only once the replica has its WAL). Two nodes (``twistd mailsvc``, every role, one process
each) share a multi-host DSN, ``host=127.0.0.1,127.0.0.1 port=P1,P2 ...
target_session_attrs=read-write``: libpq tries the hosts in order and keeps the first that
accepts writes. They resolve through the loopback DNS server (MX → 127.0.0.1) and deliver to
the in-process SMTP sink.

Loaders post batches of e-mails to both nodes without a pause. Mid-load the primary is
stopped with ``-m immediate`` (as when its machine dies), and the replica, once it has
replayed all it received, is read (which deliveries were claimed by a node, i.e. in flight
at the failover) and promoted with ``pg_ctl promote``. The nodes' connections fail, and
reconnect through the DSN to the new primary. Proven afterwards, on the new primary: every
e-mail a node answered 200 for is there and delivered, each at the sink at least once; an
e-mail reached the sink twice only if its delivery was in flight at the failover, or if an
attempt of it was deferred with its outcome unknown (the attempt's deadline aborted the
connection, or it was lost, while the end of data waited for its reply: the sink may have
kept that copy, RFC 1047).

``scripts/repeat-failover`` runs it several times (figures in docs/operations.md).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psycopg2
import pytest
import pytest_twisted as pt

from tests.helpers.drills import RECIPIENTS, Daemon, Store, blocking, sleep
from tests.helpers.failover_load import Load, caught_up, converge, none_lost, two_nodes
from tests.helpers.pgcluster import FAST, Cluster
from tests.helpers.polling import until
from tests.helpers.scratch import scratch_dir
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

#: Two clusters, two daemons, a failover: about a minute.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

#: Seconds a claimed delivery stays with its node: a delivery in flight at the failover whose
#: outcome could not be written is sent again after it. An attempt is cut off at half of it,
#: so it must leave room for SMTP sessions slowed by the load on two shared cores.
LEASE = 10
#: Seconds of load before the failover and after the promotion.
LOAD_BEFORE = 5
LOAD_AFTER = 8
#: Seconds between stopping the primary and promoting the replica (what an orchestrator takes).
OUTAGE = 1.0
CONVERGENCE_SECONDS = 60


def primary_and_replica(root: Path) -> tuple[Cluster, Cluster]:
    """A primary and its synchronous streaming replica, on loopback ports."""
    primary, replica = Cluster(root, "primary"), Cluster(root, "replica")
    user = primary.owner.pw_name
    primary.initdb(**FAST)
    # -R: standby.signal and primary_conninfo (with the application_name the primary waits for).
    primary.run("pg_basebackup", "-d", f"host=127.0.0.1 port={primary.port} user={user} application_name=replica",
                "-D", str(replica.data), "-R", "-X", "stream", "-c", "fast")
    replica.configure(port=str(replica.port))
    replica.start()
    conn = psycopg2.connect(primary.dsn("postgres"))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("ALTER SYSTEM SET synchronous_standby_names = 'replica'")
        cur.execute("SELECT pg_reload_conf()")

        def synchronous() -> bool:
            cur.execute("SELECT sync_state FROM pg_stat_replication WHERE application_name = 'replica'")
            return cur.fetchall() == [("sync",)]

        until(synchronous, 30, "the replica synchronous")
    conn.close()
    return primary, replica


@pt.ensureDeferred
async def test_no_accepted_mail_is_lost_when_the_primary_fails_over(dns_server, smtp_sink):  # noqa: F811
    root = scratch_dir("mailsvc-failover-")
    dns_server.mx(RECIPIENTS, f"mx.{RECIPIENTS}", 10)
    dns_server.a(f"mx.{RECIPIENTS}", "127.0.0.1")
    smtp_sink.starttls = False  # what is tested is the queue across a failover, not TLS
    primary = replica = None
    daemons: list[Daemon] = []
    load = None
    store = None
    passed = False
    history: list[str] = []
    try:
        began = time.monotonic()
        primary, replica = await blocking(primary_and_replica, root)
        dsn = (f"host=127.0.0.1,127.0.0.1 port={primary.port},{replica.port} dbname=mailsvc "
               f"user={primary.owner.pw_name} target_session_attrs=read-write")
        store, key = await two_nodes(root, dsn, dns_server, smtp_sink, LEASE, daemons)
        history.append(f"clusters and nodes up in {time.monotonic() - began:.1f} s")

        # Load on both nodes; the failover in the middle of it.
        load = Load([d.url for d in daemons], key)
        load.start()
        await sleep(LOAD_BEFORE)
        before = (len(load.accepted), len(smtp_sink.messages))
        failed_at = time.monotonic()
        await blocking(primary.stop, "immediate")
        store.conn.close()
        in_flight = await blocking(caught_up, replica.dsn())
        await sleep(max(0.0, OUTAGE - (time.monotonic() - failed_at)))
        await blocking(replica.run, "pg_ctl", "-D", str(replica.data), "-w", "promote")
        promoted_at = time.monotonic()
        history.append(f"primary stopped with {before[0]} accepted and {before[1]} at the sink; "
                       f"{len(in_flight)} deliveries in flight; promoted {promoted_at - failed_at:.1f} s later")
        await sleep(LOAD_AFTER)
        await blocking(load.stop)
        assert load.accepted and len(load.accepted) > before[0], "nothing was accepted after the failover"
        history.append(f"load stopped: {len(load.accepted)} accepted ({len(load.accepted) - before[0]} after the "
                       f"failover), failed requests {dict(load.failed)}")

        # Converge on the new primary: every accepted e-mail delivered, none lost.
        store = Store(dsn)
        accepted = set(load.accepted)
        assert len(accepted) == len(load.accepted)
        await converge(daemons, store, accepted, promoted_at, CONVERGENCE_SECONDS, history)
        for daemon in daemons:
            await daemon.terminate()
        none_lost(store, accepted, smtp_sink.messages, in_flight, history)
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
        for cluster in (primary, replica):
            if cluster is not None:
                await blocking(cluster.stop, "immediate")
        if passed:
            shutil.rmtree(root, ignore_errors=True)  # kept for a look when the test failed
        else:
            print("\n".join(history))
