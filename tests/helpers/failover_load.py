"""
Load and proof for a PostgreSQL failover under real nodes (tests/system/test_failover.py, and the
pg_auto_failover drill of tests/system/test_autofailover.py): loaders post batches of e-mails
without a pause; the deliveries in flight when the primary died are read on the standby;
afterwards every e-mail a node answered 200 for must be delivered, each at the SMTP sink at
least once, and one that arrived twice must have been in flight or had an attempt whose outcome
the node could not know.
"""

from __future__ import annotations

import base64
import re
import secrets
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg2
import requests

from tests.helpers.drills import DOMAIN, RECIPIENTS, Daemon, Store, blocking, setup_tenant
from tests.helpers.polling import async_until, until

BATCH = 20
LOADERS = 2
_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]+>)", re.IGNORECASE | re.MULTILINE)


async def two_nodes(root: Path, dsn: str, dns_server, smtp_sink, lease: int,
                    daemons: list[Daemon]) -> tuple[Store, str]:
    """
    Two nodes (one process each, same master key and operator token) on ``dsn``, appended to
    ``daemons`` as they are made (the caller stops them); a store on ``dsn`` and a sending key.
    """
    master_key, token = base64.b64encode(secrets.token_bytes(32)).decode(), secrets.token_urlsafe(24)
    for name in ("n1", "n2"):
        (root / name).mkdir()
        daemon = Daemon(root / name, dsn, dns_server.address, smtp_sink.port)
        daemon.env.update(MAILSVC_NODE_PROCESSES="1", MAILSVC_SECURITY_MASTER_KEY=master_key,
                          MAILSVC_OPERATOR_TOKEN=token, MAILSVC_DATABASE_STATEMENT_TIMEOUT="5",
                          MAILSVC_DELIVERY_LEASE_SECONDS=str(lease))
        daemons.append(daemon)
    daemons[0].start()
    await daemons[0].ready()  # migrates; the second then finds the schema done
    daemons[1].start()
    await daemons[1].ready()
    (root / "n1" / "state" / "operator-token").write_text(token)  # where setup_tenant reads it
    store = Store(dsn)
    return store, await blocking(setup_tenant, daemons[0], store)


class Load:
    """Loaders posting batches to the nodes in turn until stopped; the ids of 200 answers."""

    def __init__(self, urls: list[str], key: str):
        self.urls = urls
        self.key = key
        self.accepted: list[str] = []
        self.failed: Counter = Counter()
        self._stop = threading.Event()
        self._numbers = iter(range(10**9))
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(LOADERS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(60)

    def _run(self, loader: int) -> None:
        session = requests.Session()
        turn = loader
        while not self._stop.is_set():
            with self._lock:
                first = next(self._numbers) * BATCH
            body = [{"from": f"Acme <news@{DOMAIN}>", "to": [f"r{n}@{RECIPIENTS}"], "subject": f"Failover {n}",
                     "text": f"Message number {n}."} for n in range(first, first + BATCH)]
            url = self.urls[turn % len(self.urls)]
            turn += 1
            try:
                reply = session.post(url + "/emails/batch", json=body, timeout=30,
                                     headers={"Authorization": f"Bearer {self.key}"})
            except requests.RequestException as e:
                with self._lock:
                    self.failed[type(e).__name__] += 1
                time.sleep(0.1)
                continue
            with self._lock:
                if reply.status_code == 200:
                    self.accepted += [e["id"] for e in reply.json()["data"]]
                else:
                    self.failed[reply.status_code] += 1
            if reply.status_code != 200:
                time.sleep(0.1)


def caught_up(standby_dsn: str) -> set:
    """
    On the standby, once the primary is gone and all it received is replayed: the deliveries
    a node had claimed (``claim`` set) when the primary died, i.e. those in flight. Every
    commit a node was told of is among what it received (the standby is synchronous).
    """
    conn = psycopg2.connect(standby_dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            # Replay can stop short of the received position for good when the primary died
            # inside a record (the tail is incomplete): then "replayed" is replay standing still.
            last: list = [None, time.monotonic()]

            def replayed() -> bool:
                cur.execute("SELECT pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn(), pg_last_wal_replay_lsn()")
                equal, at = cur.fetchone()
                if at != last[0]:
                    last[:] = [at, time.monotonic()]
                return equal or time.monotonic() - last[1] >= 2

            until(replayed, 30, "the standby replaying what it received", interval=0.05)
            cur.execute("SELECT id FROM deliveries WHERE claim IS NOT NULL")
            return {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()


async def converge(daemons: list[Daemon], store: Store, accepted: set, since: float, seconds: float,
                   history: list[str]) -> None:
    """Until every accepted e-mail is delivered (``since``: the promotion, monotonic clock)."""
    def delivered() -> int:
        return store.count(
            "SELECT count(*) FROM deliveries WHERE status = 'delivered' AND email_id = ANY(%s::uuid[])",
            (list(accepted),))

    def all_delivered() -> bool:
        for daemon in daemons:
            assert daemon.alive(), f"a node exited; see {daemon.root}"
        return delivered() == len(accepted)

    await async_until(all_delivered, since + seconds - time.monotonic(),
                      lambda: f"every accepted e-mail delivered: {delivered()} of {len(accepted)}; {history}",
                      interval=0.5)
    history.append(f"converged {time.monotonic() - since:.1f} s after the promotion")


def none_lost(store: Store, accepted: set, messages: list, in_flight: set, history: list[str]) -> int:
    """
    Every accepted e-mail is in the new primary, delivered, and at the sink (``messages``);
    one that arrived twice was in flight at the failover. The number that arrived twice.
    """
    rows = store.rows("SELECT e.id::text, e.message_id, d.id::text, d.status FROM emails e"
                      " JOIN deliveries d ON d.email_id = e.id WHERE e.id = ANY(%s::uuid[])", (list(accepted),))
    assert {r[0] for r in rows} == accepted, "an accepted e-mail is missing from the new primary"
    assert {r[3] for r in rows} == {"delivered"}
    delivery_of = {r[1]: r[2] for r in rows}
    received: Counter = Counter()
    for message in messages:
        found = _MESSAGE_ID.search(message.data.split(b"\r\n\r\n", 1)[0])
        assert found is not None
        received[found.group(1).decode()] += 1
    missing = set(delivery_of) - set(received)
    assert not missing, f"{len(missing)} accepted e-mails never reached the sink; {history}"
    duplicates = {delivery_of[mid] for mid, n in received.items() if n > 1 and mid in delivery_of}
    unknown = _outcome_unknown(store, duplicates - in_flight)
    assert duplicates - in_flight <= set(unknown), (
        sorted(duplicates - in_flight - set(unknown))[:5], _delays(store, duplicates - in_flight), history)
    history.append(f"{len(accepted)} accepted, all delivered; {len(duplicates)} arrived twice "
                   f"(of {len(in_flight)} in flight at the failover; {len(unknown)} after an attempt whose "
                   f"outcome was unknown: {sorted(set(unknown.values()))})")
    return len(duplicates)


#: What a deferral says when the data may have reached the server but its final reply did not
#: reach the node (mailsvc/smtp/replies.py's ConnectionFault kinds): the only other way a copy
#: may arrive twice (RFC 1047), as when a loaded server answers the end of data in the instant
#: the attempt's deadline aborts the connection.
_UNKNOWN_OUTCOME = ("the delivery deadline passed during", "connection lost", "no reply to")


def _delays(store: Store, deliveries: set) -> dict[str, list[str]]:
    """The ``email.delivery_delayed`` messages of each of ``deliveries``."""
    if not deliveries:
        return {}
    rows = store.rows("SELECT data->>'delivery_id', data->>'message' FROM events"
                      " WHERE type = 'email.delivery_delayed' AND data->>'delivery_id' = ANY(%s)",
                      (sorted(deliveries),))
    delays: dict[str, list[str]] = {d: [] for d in deliveries}
    for delivery, message in rows:
        delays[delivery].append(message or "")
    return delays


def _outcome_unknown(store: Store, deliveries: set) -> dict[str, str]:
    """Those of ``deliveries`` an attempt of which was deferred with its outcome unknown, and why."""
    unknown = {}
    for delivery, messages in _delays(store, deliveries).items():
        for message in messages:
            kind = next((k for k in _UNKNOWN_OUTCOME if k in message), None)
            if kind is not None:
                unknown[delivery] = kind
    return unknown
