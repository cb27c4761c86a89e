"""
The operator's queue: ``GET /admin/v1/queue`` (the summary) and a filtered
``GET /admin/v1/queue/deliveries`` on a queue of ``--rows`` (1,000,000) deliveries.

Starts a node the way the daemon does (``root.build``: embedded PostgreSQL with its default
durable settings in a throw-away state directory, migrations, loops, the HTTP listener on
127.0.0.1; roles ``api, webhooks, scheduler``: nothing is delivered, the queue stays as made)
in a process of its own. ``--tenants`` (20) tenants are made through the operator API; their
e-mails (100 recipients each) and deliveries are made in SQL with ``generate_series``: one
recipient domain of ``--destinations`` (50) each, three in four deferred with one of a few 4xx
last responses, one in ten due, one in a hundred held; queued over the last 3 days. Then
``ANALYZE`` (autovacuum's job on a live system), and ``--calls`` (50) sequential calls per case
over one keep-alive connection, after 3 warm-up calls: p50 and p99. Target: summary p99 < 200 ms.
Then what the queue's counts (migration 0026: statement triggers and the lease index) add to
the accept and delivery statements on that table: each statement with them and without them
(triggers disabled, index dropped, in a transaction rolled back), median ms.

    .venv/bin/python -m bench.queue [--rows 1000000] [--calls 50] [--rounds 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import time

from bench import common
from bench.common import load_average

PER_EMAIL = 100


serve = common.serve_api


class Node(common.ApiNode):
    module = "bench.queue"


def database(node: Node):
    import psycopg2

    db = psycopg2.connect(f"host={node.state / 'postgresql' / 'run'} dbname=mailsvc user=mailsvc")
    db.autocommit = True
    return db


def sql(db, statement: str, args=()) -> list[tuple]:
    with db.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall() if cur.description else []


def fill(node: Node, db, rows: int, tenants: int, destinations: int) -> float:
    """The queue, made in SQL; seconds it took."""
    ids = []
    for n in range(tenants):
        _, made = common.api(node.url + "/admin/v1/tenants", "POST", node.operator, {"name": f"tenant {n}"})
        ids.append(made["id"])
    started = time.monotonic()
    emails = rows // PER_EMAIL
    # Time-ordered ids as the service's UUIDv7 (the e-mail's queued time in its first 48 bits).
    sql(db, """
        INSERT INTO emails (id, tenant_id, message_id, sender, recipients, subject, status, last_event, message,
                            source, created_at)
        SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7000'
                || lpad(to_hex(g), 16, '0'))::uuid,
               (%s::uuid[])[1 + g %% %s], '<q' || g || '@bench>', 'news@bench.example.com', '{}', 'Hello',
               'queued', 'delivery_delayed', 'x', 'api', t
        FROM generate_series(1, %s) g, LATERAL (SELECT now() - (g * interval '259000 seconds') / %s AS t) tt
    """, (ids, tenants, emails, emails))
    sql(db, """
        INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, attempts, due_at, updated_at,
                                retry_until, last_response, held_reason)
        SELECT (left(e.id::text, 19) || lpad(to_hex(r), 4, '0') || '-' || right(e.id::text, 12))::uuid,
               e.id, e.tenant_id,
               'r' || r || '@dest' || ((r + i) %% %s) || '.example',
               CASE WHEN k < 10 THEN 'queued' ELSE 'deferred' END,
               CASE WHEN k < 10 THEN 0 ELSE 1 + k %% 5 END,
               CASE WHEN k = 99 THEN NULL WHEN k < 10 THEN now() - interval '1 minute'
                    ELSE now() + (k * interval '1 minute') END,
               now(), e.created_at + interval '72 hours',
               CASE WHEN k < 10 THEN NULL WHEN k %% 3 = 0 THEN '451 4.7.1 greylisted, try again later'
                    WHEN k %% 3 = 1 THEN '421 4.7.0 too many connections from your IP'
                    ELSE '452 4.2.2 mailbox full' END,
               CASE WHEN k = 99 THEN 'bench hold' END
        FROM (SELECT id, tenant_id, created_at, row_number() OVER (ORDER BY id) AS i FROM emails) e,
             generate_series(1, %s) r, LATERAL (SELECT (r * 7 + e.i) %% 100 AS k) kk
    """, (destinations, PER_EMAIL))
    sql(db, "ANALYZE emails")
    sql(db, "ANALYZE deliveries")
    return time.monotonic() - started


#: The delivery statements whose cost the queue's counts add to (their triggers and the lease
#: index), each as the service writes it, on ``rows`` due deliveries of one tenant.
TRIGGERED = {
    "accept: INSERT 1 delivery": """
        INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)
        SELECT gen_random_uuid(), e.id, e.tenant_id, 'new@dest1.example', 'queued', now(), now(),
               now() + interval '72 hours' FROM emails e ORDER BY e.id DESC LIMIT 1""",
    "accept: INSERT 100 deliveries (batch, fan-out)": """
        INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)
        SELECT gen_random_uuid(), e.id, e.tenant_id, 'new' || g || '@dest' || (g % 50) || '.example', 'queued',
               now(), now(), now() + interval '72 hours'
        FROM (SELECT id, tenant_id FROM emails ORDER BY id DESC LIMIT 1) e, generate_series(1, 100) g""",
    "claim: UPDATE 100 (lease)": """
        UPDATE deliveries SET due_at = now() + interval '5 minutes', claim = gen_random_uuid(),
               claimed_by = 'bench', claimed_until = now() + interval '5 minutes'
        WHERE id IN (SELECT id FROM deliveries WHERE status = 'queued' AND due_at <= now() LIMIT 100)""",
    "outcome: UPDATE 100 (deferred)": """
        UPDATE deliveries SET status = 'deferred', due_at = now() + interval '10 minutes', claim = NULL,
               claimed_by = NULL, claimed_until = NULL, attempts = attempts + 1,
               last_response = '451 4.7.1 greylisted, try again later', updated_at = now()
        WHERE id IN (SELECT id FROM deliveries WHERE status = 'queued' AND due_at <= now() LIMIT 100)""",
}
#: What the queue's counts add to those statements, taken away for the "without" case.
WITHOUT_COUNTS = "ALTER TABLE deliveries DISABLE TRIGGER USER; DROP INDEX deliveries_lease"


def trigger_cost(db, rounds: int, runs: int = 10) -> dict[str, tuple[float, float]]:
    """
    Median ms of each statement with the counts and without: ``rounds`` of a transaction of
    ``runs`` with them, then one of ``runs`` without (each run rolled back to a savepoint, each
    transaction rolled back), so that neither pays for plans the other's DDL made stale.
    """
    db.autocommit = False
    found: dict[str, tuple[float, float]] = {}
    try:
        for name, statement in TRIGGERED.items():
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(rounds):
                for counted in (True, False):
                    with db.cursor() as cur:
                        if not counted:
                            cur.execute(WITHOUT_COUNTS)
                        for _ in range(runs):
                            cur.execute("SAVEPOINT run")
                            started = time.perf_counter()
                            cur.execute(statement)
                            times[counted].append((time.perf_counter() - started) * 1000)
                            cur.execute("ROLLBACK TO SAVEPOINT run")
                    db.rollback()
            found[name] = (statistics.median(times[True]), statistics.median(times[False]))
    finally:
        db.rollback()
        db.autocommit = True
    return found


def timed(node: Node, path: str, calls: int, cold: bool = False) -> dict:
    """p50 and p99 of ``calls`` GETs of ``path`` after 3 warm-up calls; ``cold``: each after an
    action (a release of no delivery), so that each computes the summary anew."""
    connection = http.client.HTTPConnection("127.0.0.1", node.http, timeout=60)
    headers = {"Authorization": f"Bearer {node.operator}"}
    latencies = []
    body = None
    for n in range(3 + calls):
        if cold:
            connection.request("POST", "/admin/v1/queue/release", headers=headers,
                               body=json.dumps({"ids": ["00000000-0000-7000-8000-000000000000"]}))
            connection.getresponse().read()
        started = time.perf_counter()
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise SystemExit(f"GET {path}: HTTP {response.status} {data[:500]!r}")
        if n >= 3:
            latencies.append(elapsed * 1000)
        body = json.loads(data)
    connection.close()
    latencies.sort()
    return {"p50": statistics.median(latencies), "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            "body": body}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="queued deliveries")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--destinations", type=int, default=50, help="recipient domains")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per case")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of 10 runs of each statement (trigger cost)")
    parser.add_argument("--serve", nargs=2, metavar=("STATE_DIR", "HTTP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    root = common.scratch_dir("mailsvc-bench-queue-")
    node: Node | None = None
    db = None
    try:
        node = Node(root)
        db = database(node)
        seconds = fill(node, db, args.rows, args.tenants, args.destinations)
        queued = sql(db, "SELECT count(*) FROM deliveries WHERE status IN ('queued', 'deferred')")[0][0]
        print(f"{os.cpu_count()} cores; server, PostgreSQL (durable defaults) and the client share them; "
              f"load {load_average()}")
        print(f"{queued:,} queued deliveries ({args.tenants} tenants, {args.destinations} destinations) "
              f"made in {seconds:.0f} s; {args.calls} sequential calls per case after 3 warm-up calls")
        tenant_id = sql(db, "SELECT id FROM tenants ORDER BY id LIMIT 1")[0][0]
        cases = {
            "GET /admin/v1/queue (summary, computed: each after an action)": ("/admin/v1/queue", True),
            "GET /admin/v1/queue (summary, as served: at most 10 s old)": ("/admin/v1/queue", False),
            "GET /admin/v1/queue/deliveries?destination=&state=deferred&code=451": (
                "/admin/v1/queue/deliveries?destination=dest7.example&state=deferred&code=451&limit=100", False),
            "GET /admin/v1/queue/deliveries?tenant_id=&min_age_seconds=86400": (
                f"/admin/v1/queue/deliveries?tenant_id={tenant_id}&min_age_seconds=86400&limit=100", False),
        }
        print(f"{'case':70s} {'p50 ms':>7} {'p99 ms':>7}")
        for name, (path, cold) in cases.items():
            r = timed(node, path, args.calls, cold)
            print(f"{name:70s} {r['p50']:>7.1f} {r['p99']:>7.1f}", flush=True)
            if path == "/admin/v1/queue":
                total = sum(s["count"] for s in r["body"]["by_state"])
                assert total == queued, (total, queued)
            else:
                assert r["body"]["data"], path
        print(f"{f'statement ({queued:,} queued; median of {10 * args.rounds} runs, rolled back)':70s}"
              f" {'with':>7} {'without':>7}  ms")
        for name, (counted, plain) in trigger_cost(db, args.rounds).items():
            print(f"{name:70s} {counted:>7.2f} {plain:>7.2f}", flush=True)
    finally:
        if db is not None:
            db.close()
        if node is not None:
            node.stop(owner=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
