"""
Contacts: loading contacts through ``POST /contacts/batch``, and listing them
(``GET /contacts?q=`` and ``GET /segments/{id}/contacts``) on an account of a million.

Starts a node the way the daemon does (``root.build``: embedded PostgreSQL with its default
durable settings in a throw-away state directory, migrations, loops, the HTTP listener on
127.0.0.1; roles ``api, webhooks, scheduler``, nothing delivered) in a process of its own. The
tenants are made through the operator API (``api_rate_per_sec`` raised).

- load: ``--contacts`` (100,000) new contacts, ``--batch`` (1,000) per ``POST /contacts/batch``,
  from ``--clients`` (2) keep-alive HTTP clients at once, every row with a first and last name
  and two properties (a string and a number), every batch into one segment (``segment_id``).
  The bodies are encoded before the clock starts. Target: >= 10,000 contacts/s.
- list: a second account of ``--million`` (1,000,000) contacts made directly in SQL with
  ``generate_series`` (time-ordered ids like the service's UUIDv7, 100 first names x 100 last
  names, 1 % of the addresses on the suppression list, one segment holding every second
  contact), then ``ANALYZE`` (autovacuum's job on a live system). ``wrk -t1 -c1 --latency``
  (``--connections``) for ``--duration`` seconds per case, ``limit=100``: the first page, and a
  page far down through ``after`` (the cursor of the match ``--deep`` places down, found in
  SQL). Target: p99 < 20 ms.
- ``--background``: other accounts' data first (bench/background.py), as a node that has run for
  a while holds it. Target: the load at >= 0.9x its rate without. ``--statements``: what
  PostgreSQL's backends ran during each load round (pg_stat_activity sampled) and each table's
  scans.

    bash -c 'source bench/install.sh wrk; python -m bench.contacts'
    .venv/bin/python -m bench.contacts [--only load,list] [--contacts 100000] [--million 1000000]
        [--background [--background-contacts 1000000]]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path

from bench import background, common
from bench.common import Meter, load_average
from bench.http_auth import parse_wrk

FIRST = ["Ann", "Anna", "Bob", "Carla", "Dan", "Eve", "Frank", "Grace", "Hugo", "Ines", "Jack", "Karl", "Lena",
         "Maria", "Mark", "Martin", "Nina", "Omar", "Paul", "Rosa", "Sam", "Tina", "Uma", "Victor", "Walt"]
LAST = ["Smith", "Jones", "Martinez", "Brown", "Garcia", "Miller", "Davis", "Lopez", "Wilson", "Moore",
        "Taylor", "Thomas", "White", "Harris", "Clark", "Lewis", "Walker", "Hall", "Young", "King"]


serve = common.serve_api


class Node(common.ApiNode):
    module = "bench.contacts"


def tenant(node: Node, name: str) -> tuple[str, str]:
    """A tenant made through the operator API, its request rate raised: (id, API key)."""
    _, made = common.api(node.url + "/admin/v1/tenants", "POST", node.operator, {"name": name})
    common.api(node.url + f"/admin/v1/tenants/{made['id']}", "PATCH", node.operator, {"api_rate_per_sec": 1_000_000})
    return made["id"], made["api_key"]["token"]


def node_dsn(node: Node) -> str:
    return f"host={node.state / 'postgresql' / 'run'} dbname=mailsvc user=mailsvc"


def database(node: Node):
    import psycopg2

    db = psycopg2.connect(node_dsn(node))
    db.autocommit = True
    return db


def sql(db, statement: str, args=()) -> list[tuple]:
    with db.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall() if cur.description else []


# ---------------------------------------------------------------------------------------------
# Load


def batch_body(start: int, count: int, segment_id: str) -> bytes:
    rows = [{
        "email": f"{FIRST[n % len(FIRST)].lower()}.{LAST[n // len(FIRST) % len(LAST)].lower()}{n}@load.example.com",
        "first_name": FIRST[n % len(FIRST)], "last_name": LAST[n // len(FIRST) % len(LAST)],
        "properties": {"plan": "pro" if n % 3 else "free", "seats": n % 50},
    } for n in range(start, start + count)]
    return json.dumps({"contacts": rows, "segment_id": segment_id}).encode()


def load(node: Node, key: str, data_dir: Path, total: int, size: int, clients: int) -> dict:
    _, segment = common.api(node.url + "/segments", "POST", key, {"name": "loaded"})
    bodies = [batch_body(start, min(size, total - start), segment["id"]) for start in range(0, total, size)]
    todo = list(reversed(bodies))
    lock = threading.Lock()
    latencies: list[float] = []
    failures: list[str] = []
    saved = [0]

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", node.http, timeout=120)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        while True:
            with lock:
                if not todo:
                    break
                body = todo.pop()
            started = time.monotonic()
            connection.request("POST", "/contacts/batch", body, headers)
            response = connection.getresponse()
            answer = response.read()
            elapsed = time.monotonic() - started
            with lock:
                latencies.append(elapsed)
                if response.status != 200:
                    failures.append(f"HTTP {response.status}: {answer[:300]!r}")
                    continue
                reply = json.loads(answer)
                saved[0] += len(reply["data"])
                if reply["errors"]:
                    failures.append(f"row errors: {reply['errors'][:3]}")
        connection.close()

    meter = Meter([node.pid], data_dir)
    meter.start()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = meter.done()
    latencies.sort()
    return {
        "contacts": saved[0], "seconds": m["elapsed"], "rate": saved[0] / m["elapsed"],
        "p50": statistics.median(latencies) * 1000, "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "server_cpu": m["cpu_s"] / m["elapsed"], "cpu_us": m["cpu_s"] / max(saved[0], 1) * 1e6,
        "pg_cpu": m["pg_cpu"], "pg_us": m["pg_cpu"] * m["elapsed"] / max(saved[0], 1) * 1e6,
        "failures": failures,
    }


# ---------------------------------------------------------------------------------------------
# A million contacts, made in SQL


def million(db, tenant_id: str, count: int) -> str:
    """``count`` contacts, 1 % suppressed, every second one in a segment; the segment's id."""
    first = "ARRAY[" + ",".join(f"'{n}'" for n in FIRST) + "]"
    last = "ARRAY[" + ",".join(f"'{n}'" for n in LAST) + "]"
    # A UUIDv7 shape: 48 bits of milliseconds, then version 7 and a counter, as the service makes.
    uuid_of = ("(lpad(to_hex(1767225600000 + n), 12, '0') || '7' || lpad(to_hex(n %% 4096), 3, '0')"
               " || '8' || lpad(to_hex(n), 15, '0'))::uuid")
    started = time.monotonic()
    sql(db, f"""
        INSERT INTO contacts (id, tenant_id, email, first_name, last_name, properties, created_at, updated_at)
        SELECT {uuid_of}, %s,
               lower(f) || '.' || lower(l) || n || '@list.example.com', f, l,
               jsonb_build_object('plan', CASE WHEN n %% 3 = 0 THEN 'free' ELSE 'pro' END, 'seats', n %% 50),
               now(), now()
        FROM generate_series(1, %s) AS n,
             LATERAL (SELECT ({first})[1 + n %% {len(FIRST)}] AS f,
                             ({last})[1 + (n / {len(FIRST)}) %% {len(LAST)}] AS l) names
    """, (tenant_id, count))
    sql(db, """
        INSERT INTO suppressions (id, tenant_id, email, origin, created_at)
        SELECT gen_random_uuid(), tenant_id, email, 'unsubscribe', now()
        FROM contacts WHERE tenant_id = %s AND (('x' || substr(id::text, 25, 12))::bit(48)::bigint %% 100) = 0
    """, (tenant_id,))
    segment = sql(db, """
        INSERT INTO segments (id, tenant_id, name, created_at, updated_at)
        VALUES (gen_random_uuid(), %s, 'every second', now(), now()) RETURNING id
    """, (tenant_id,))[0][0]
    sql(db, """
        INSERT INTO segment_contacts (segment_id, contact_id, created_at)
        SELECT %s, id, now() FROM contacts
        WHERE tenant_id = %s AND (('x' || substr(id::text, 25, 12))::bit(48)::bigint %% 2) = 0
    """, (segment, tenant_id))
    sql(db, "VACUUM ANALYZE contacts")
    sql(db, "VACUUM ANALYZE segment_contacts")
    sql(db, "VACUUM ANALYZE suppressions")
    print(f"made {count:,} contacts in SQL in {time.monotonic() - started:.0f} s", flush=True)
    return str(segment)


def cursor(db, statement: str, args) -> str:
    rows = sql(db, statement, args)
    if not rows:
        raise SystemExit("no cursor: the account has fewer matches than --deep")
    return str(rows[0][0])


def lua(root: Path, key: str) -> Path:
    script = root / "get.lua"
    script.write_text(f'wrk.method = "GET"\nwrk.headers["Authorization"] = "Bearer {key}"\n')
    return script


def wrk(url: str, script: Path, connections: int, duration: int) -> dict:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "--latency",
                          "-s", str(script), url], check=True, capture_output=True, text=True).stdout
    return parse_wrk("\n".join(line.rstrip() for line in out.splitlines()))


def list_round(node: Node, data_dir: Path, url: str, script: Path, connections: int, duration: int) -> dict:
    meter = Meter([node.pid], data_dir)
    meter.start()
    r = wrk(url, script, connections, duration)
    m = meter.done()
    requests = max(r["requests"], 1)
    return {**r, "cpu_us": m["cpu_s"] / requests * 1e6, "pg_us": m["pg_cpu"] * m["elapsed"] / requests * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--only", default="load,list")
    parser.add_argument("--contacts", type=int, default=100_000, help="contacts loaded")
    parser.add_argument("--batch", type=int, default=1000, help="rows per POST /contacts/batch")
    parser.add_argument("--clients", type=int, default=2, help="HTTP clients loading at once")
    parser.add_argument("--runs", type=int, default=1, help="load rounds (each new contacts)")
    parser.add_argument("--million", type=int, default=1_000_000, help="contacts of the listed account")
    parser.add_argument("--deep", type=int, default=200_000, help="how far down the far page's cursor lies")
    parser.add_argument("--q", default="mar", help="the q of the searches")
    parser.add_argument("--connections", type=int, default=1, help="wrk connections while listing")
    parser.add_argument("--duration", type=int, default=10, help="seconds per list case")
    background.add_arguments(parser)
    parser.add_argument("--statements", action="store_true",
                        help="sample what PostgreSQL runs during each load round (bench/background.py)")
    parser.add_argument("--keep", action="store_true", help="leave the server up (for profiling); Enter stops")
    parser.add_argument("--serve", nargs=2, metavar=("STATE_DIR", "HTTP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    only = set(args.only.split(","))
    if "list" in only:
        common.require(("wrk",), "bench/install.sh")
    root = common.scratch_dir("mailsvc-bench-contacts-")
    node: Node | None = None
    db = None
    failed = False
    try:
        node = Node(root)
        data_dir = node.data_dir
        db = database(node)
        print(f"{os.cpu_count()} cores; server, PostgreSQL (durable defaults) and the clients share them; "
              f"load {load_average()}", flush=True)
        background.fill_from(args, db)
        if "load" in only:
            _, key = tenant(node, "load")
            warm = load(node, key, data_dir, 5 * args.batch, args.batch, args.clients)  # warm-up
            failed |= bool(warm["failures"])
            print(f"\nPOST /contacts/batch: {args.contacts:,} new contacts, {args.batch:,} per call, "
                  f"{args.clients} clients")
            print(f"{'run':>3} {'contacts':>9} {'seconds':>8} {'contacts/s':>10} {'p50 ms':>7} {'p99 ms':>7} "
                  f"{'srv CPU':>8} {'srv µs/contact':>14} {'pg CPU':>7} {'pg µs/contact':>13}")
            for run in range(1, args.runs + 1):
                _, key = tenant(node, f"load{run}")
                with background.Statements(node_dsn(node)) if args.statements else contextlib.nullcontext():
                    r = load(node, key, data_dir, args.contacts, args.batch, args.clients)
                failed |= bool(r["failures"])
                print(f"{run:>3} {r['contacts']:>9,} {r['seconds']:>8.2f} {r['rate']:>10,.0f} {r['p50']:>7.0f} "
                      f"{r['p99']:>7.0f} {r['server_cpu']:>8.0%} {r['cpu_us']:>14.0f} {r['pg_cpu']:>7.0%} "
                      f"{r['pg_us']:>13.0f} {'; '.join(r['failures'][:2])}", flush=True)
        if "list" in only:
            tenant_id, key = tenant(node, "million")
            segment = million(db, tenant_id, args.million)
            prefix = args.q.lower() + "%"
            deep_q = cursor(db, """
                SELECT id FROM contacts WHERE tenant_id = %s
                  AND (email LIKE %s OR lower(first_name) LIKE %s OR lower(last_name) LIKE %s)
                ORDER BY id DESC OFFSET %s LIMIT 1""", (tenant_id, prefix, prefix, prefix, args.deep // 10))
            deep_s = cursor(db, "SELECT contact_id FROM segment_contacts WHERE segment_id = %s"
                                " ORDER BY contact_id DESC OFFSET %s LIMIT 1", (segment, args.deep))
            matches = sql(db, """SELECT count(*) FROM contacts WHERE tenant_id = %s
                  AND (email LIKE %s OR lower(first_name) LIKE %s OR lower(last_name) LIKE %s)""",
                          (tenant_id, prefix, prefix, prefix))[0][0]
            script = lua(root, key)
            cases = {
                f"GET /contacts?q={args.q} first page": f"/contacts?q={args.q}&limit=100",
                f"GET /contacts?q={args.q} after the {args.deep // 10:,}th match":
                    f"/contacts?q={args.q}&limit=100&after={deep_q}",
                "GET /segments/{id}/contacts first page": f"/segments/{segment}/contacts?limit=100",
                f"GET /segments/{{id}}/contacts after the {args.deep:,}th member":
                    f"/segments/{segment}/contacts?limit=100&after={deep_s}",
                "GET /contacts first page (no q)": "/contacts?limit=100",
            }
            print(f"\n{args.million:,} contacts; q={args.q!r} matches {matches:,}; the segment holds "
                  f"{args.million // 2:,}; limit=100; wrk -t1 -c{args.connections} -d{args.duration}s")
            print(f"{'case':58s} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>7} {'srv µs/req':>10} "
                  f"{'pg µs/req':>9}")
            for name, path in cases.items():
                wrk(node.url + path, script, args.connections, 2)  # warm-up
                r = list_round(node, data_dir, node.url + path, script, args.connections, args.duration)
                failed |= bool(r["non_2xx"] or r["socket_errors"])
                print(f"{name:58s} {r['rps']:>7.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} {r['non_2xx']:>7} "
                      f"{r['cpu_us']:>10.0f} {r['pg_us']:>9.0f} {r['socket_errors']}", flush=True)
        if args.keep:
            print("server:", node.process.pid, node.url, "- press Enter to stop", flush=True)
            input()
        if failed:
            raise SystemExit("some requests failed; the figures are not valid")
    finally:
        if db is not None:
            db.close()
        if node is not None:
            node.stop(owner=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
