"""
Assembling a node's application (``compose.assemble``: every part built, every route mounted),
as a daemon's start and every integration test does: the first assembly of the process, and
the median of the ones after it. Nothing is started; the database is never connected to.

    .venv/bin/python -m bench.assemble [--times 12]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time

from twisted.internet import reactor

from mailsvc import compose
from mailsvc.config import load
from mailsvc.store.database import Database


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=12, help="assemblies (at least 2)")
    args = parser.parse_args()
    config = load(None, environ={})
    db = Database(reactor, "dbname=mailsvc_bench_never_connected", 1)
    seconds = []
    for _ in range(max(2, args.times)):
        started = time.perf_counter()
        compose.assemble(reactor, config, db, secrets.token_bytes(32), "op_bench")
        seconds.append(time.perf_counter() - started)
    print(f"first assembly {seconds[0] * 1000:.0f} ms; median of the {len(seconds) - 1} after it"
          f" {statistics.median(seconds[1:]) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
