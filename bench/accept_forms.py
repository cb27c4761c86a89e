"""
The accept statement's two row forms for small statements, on the embedded PostgreSQL cluster
(durable defaults) in a throw-away directory: a table's rows as one ``VALUES`` list
(``store.accept.rowwise``) or as columns split by ``unnest`` (``store.accept.columnar``), for
1 to 4 SMTP-submitted e-mails (the 3.4 KB message stored, one delivery and one ``email.sent``
event each, the quota charge), as ``store.accept.write`` builds and sends them (not PREPAREd).

    .venv/bin/python -m bench.accept_forms [--repeats 300]

Per statement, median over the repeats, the forms alternating: the client's building
(``accept.write`` from the rows to the text it sends, then psycopg2 composing it), PostgreSQL's planning
and execution (``EXPLAIN (ANALYZE)``), and the round trip of the statement itself; each in a
transaction rolled back, so the tables do not grow and no commit is counted (a commit costs
both forms the same).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import time
import uuid
from pathlib import Path

from bench.common import load_average, react_in_scratch
from bench.sending import rfc5322


class _Captured:
    """A database that keeps the statement it is given instead of running it."""

    async def fetchall(self, sql, parameters, desc=None):
        self.statement = (sql, parameters)
        return [[0, None]]


def _rows(tenant_id: uuid.UUID, n: int, clock):
    from mailsvc import timefmt
    from mailsvc.domain.headers import Mailbox
    from mailsvc.store.accept import AcceptRows, DeliveryRow, EmailRow, EventRow

    now = timefmt.from_seconds(clock.seconds())
    rows = AcceptRows()
    for i in range(n):
        email_id = uuid.uuid4()
        rows.emails.append(EmailRow(
            id=email_id, tenant_id=tenant_id, domain_id=None, message_id=f"<m{i}@bench.example.com>",
            sender="news@bench.example.com", to=(Mailbox("", f"customer{i}@example.net"),), cc=(), bcc=(),
            reply_to=(), subject="Your orders this week", html=None, text=None, tags=[], stream="transactional",
            source="smtp", scheduled_at=None, status="queued", last_event="sent", message=rfc5322(i)[:-3],
            created_at=now, headers=(), links_base=None))
        rows.deliveries.append(DeliveryRow(uuid.uuid4(), email_id, tenant_id, f"customer{i}@example.net", "queued",
                                           now, now, None))
        rows.events.append(EventRow(tenant_id, "email.sent", {"email_id": str(email_id)}))
    rows.charge(tenant_id, n, 10**9, 10**9)
    return rows, now


def _built(tenant_id, n, clock, cursor):
    """The statement ``accept.write`` sends for ``n`` e-mails, and the client's seconds to build it."""
    from mailsvc.store import accept

    rows, now = _rows(tenant_id, n, clock)
    started = time.perf_counter()
    db = _Captured()
    coroutine = accept.write(db, clock, rows, now)  # type: ignore[arg-type]
    try:
        coroutine.send(None)
    except StopIteration:
        pass
    sql, parameters = db.statement
    sent = cursor.mogrify(sql, parameters)
    return sent, time.perf_counter() - started


def _server(cursor, sent: bytes) -> tuple[float, float, float]:
    """Planning and execution milliseconds (EXPLAIN ANALYZE) and the plain round trip's."""
    cursor.execute("BEGIN")
    cursor.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + sent)
    (plan,) = cursor.fetchone()
    cursor.execute("ROLLBACK")
    cursor.execute("BEGIN")
    started = time.perf_counter()
    cursor.execute(sent)
    trip = time.perf_counter() - started
    cursor.execute("ROLLBACK")
    return plan[0]["Planning Time"], plan[0]["Execution Time"], trip * 1000


async def run(reactor, args, root: Path) -> None:
    import psycopg2

    from mailsvc.app.accounts import Accounts
    from mailsvc.app.apikeys import KeyRing
    from mailsvc.store import accept
    from mailsvc.store.database import Database
    from mailsvc.store.embedded import EmbeddedCluster, find_bindir
    from mailsvc.store.migrate import migrate

    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir())
    dsn = await cluster.start()
    db = Database(reactor, dsn, 2)
    try:
        await db.start()
        await migrate(db)
        keyring = KeyRing(reactor, db, secrets.token_bytes(32), "re", 10)
        tenant, _, _ = await Accounts(reactor, db, keyring, 10).create_tenant({"name": "bench"})
        db.stop()
        connection = psycopg2.connect(dsn)
        connection.autocommit = True
        cursor = connection.cursor()
        forms = {"unnest": 0, "VALUES": accept.VALUES_ROWS}
        print(f"load {load_average()}; {os.cpu_count()} cores; median of {args.repeats} per cell, forms alternating;"
              " embedded PostgreSQL (durable defaults), not PREPAREd")
        print(f"{'e-mails':>7} {'form':>6} {'client µs':>10} {'plan ms':>8} {'exec ms':>8} {'round trip ms':>13}"
              f" {'statement bytes':>15}")
        for n in range(1, 5):
            seen: dict[str, list[tuple]] = {form: [] for form in forms}
            for _ in range(args.repeats):
                for form, rows_up_to in forms.items():
                    accept.VALUES_ROWS = rows_up_to
                    sent, client = _built(tenant.id, n, reactor, cursor)
                    seen[form].append((client * 1e6, *_server(cursor, sent), len(sent)))
            for form, samples in seen.items():
                client, plan, execution, trip, size = (statistics.median(column) for column in zip(*samples,
                                                                                                   strict=True))
                print(f"{n:>7} {form:>6} {client:>10.1f} {plan:>8.3f} {execution:>8.3f} {trip:>13.3f}"
                      f" {size:>15.0f}", flush=True)
        accept.VALUES_ROWS = forms["VALUES"]
        connection.close()
    finally:
        db.stop()
        await cluster.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args(argv)

    react_in_scratch("mailsvc-bench-accept-", lambda reactor, root: run(reactor, args, root))


if __name__ == "__main__":
    main()
