"""
The webhook dispatcher's outcomes as its record statement reads them, in two parameter forms,
on the embedded PostgreSQL cluster (durable defaults) in a throw-away directory: one array per
field split by ``unnest`` (the form before 2026-12-03: ids as lists of ``uuid.UUID``, which
psycopg2 quotes with its Python adapter one by one), and one JSON text of an array per outcome
(``store.webhooks.outcomes_json``, now used).

    .venv/bin/python -m bench.webhook_outcomes [--outcomes 30] [--repeats 300]

Per statement, median over the repeats: the client's composing (the parameters built, then
psycopg2's ``mogrify``), and PostgreSQL's planning and execution (``EXPLAIN (ANALYZE)``) of the
outcomes' table alone (counted), the rest of the statement being the same for both.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime

from bench.common import load_average, react_in_scratch

COLUMNS = ("webhook_id", "event_id", "claim", "state", "counted", "due_at", "at", "status", "response", "duration",
           "error", "detail")
TYPES = ("uuid", "uuid", "uuid", "text", "int", "timestamptz", "timestamptz", "int", "text", "int", "text", "text")


async def run(reactor, root, args) -> None:
    import psycopg2
    import psycopg2.extras

    from mailsvc.store import webhooks as rows
    from mailsvc.store.database import Database
    from mailsvc.store.embedded import EmbeddedCluster, find_bindir

    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir())
    dsn = await cluster.start()
    db = Database(reactor, dsn, 1)
    await db.start()
    psycopg2.extras.register_uuid()
    composer = psycopg2.connect(dsn)
    try:
        now = datetime.now(UTC)
        outcomes = [rows.Outcome(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "pending", 1, now, now, 503,
                                 "Service Unavailable", 41, "http_5xx") for _ in range(args.outcomes)]

        def arrays() -> dict:
            values = [(o.webhook_id, o.event_id, o.claim, o.state, o.counted, o.due_at, o.at, o.status, o.response,
                       o.duration_ms, o.error, o.detail) for o in outcomes]
            return {f"c{n}": list(column) for n, column in enumerate(zip(*values, strict=True))}

        split = ", ".join(f"%(c{n})s::{kind}[]" for n, kind in enumerate(TYPES))
        picked = ", ".join(f"(o->>{n})::{kind}" for n, kind in enumerate(TYPES))
        forms = {
            "arrays (before)": (f"SELECT count(*) FROM unnest({split}) AS v ({', '.join(COLUMNS)})", arrays),
            "one JSON text (now)": (f"SELECT count(*) FROM (SELECT {picked} FROM jsonb_array_elements(%(j)s::jsonb)"
                                    " AS o) v", lambda: {"j": rows.outcomes_json(outcomes)}),
        }
        print(f"{args.outcomes} outcomes a statement, {args.repeats} repeats; load {load_average()}")
        cursor = composer.cursor()
        for name, (sql, parameters) in forms.items():
            composing, server = [], []
            for _ in range(args.repeats):
                started = time.process_time()
                cursor.mogrify(sql, parameters())
                composing.append(time.process_time() - started)
            for _ in range(min(args.repeats, 100)):
                plan = await db.fetchall("EXPLAIN (ANALYZE, SUMMARY) " + sql, parameters())
                lines = [next(iter(r.values())) for r in plan]
                server.append(sum(float(line.split(": ")[1].split()[0]) / 1000 for line in lines
                                  if line.startswith(("Planning Time", "Execution Time"))))
            print(f"{name:>20}: composing {statistics.median(composing) * 1e6:5.0f} us, "
                  f"PostgreSQL {statistics.median(server) * 1e6:5.0f} us")
    finally:
        composer.close()
        db.stop()
        await cluster.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--outcomes", type=int, default=30, help="outcomes a statement (a step wrote 28 at 500/s)")
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args(argv)
    react_in_scratch("mailsvc-bench-webhook-outcomes-", lambda reactor, root: run(reactor, root, args))


if __name__ == "__main__":
    main()
