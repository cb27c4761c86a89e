"""
``python -m mailsvc.partition --config FILE``: the opt-in step to time partitions of an external
PostgreSQL (docs/operations.md, "Time partitions"). A command of its own, not a migration: the
numbered migrations run on every database, this one only where an operator asks for it.
"""

from __future__ import annotations

import argparse
import sys

from mailsvc.config import ConfigError, load
from mailsvc.store import partitions


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mailsvc.partition",
        description="Partition emails, events, deliveries and attachments by month (opt-in; an external"
                    " PostgreSQL only). Safe while the nodes run; a second run does nothing.")
    parser.add_argument("--config", "-c", help="the nodes' configuration file (its database.dsn is used)")
    parser.add_argument("--retention-months", type=int, default=partitions.DEFAULT_RETENTION_MONTHS,
                        help="months kept; older months are dropped by the scheduler (default %(default)s)")
    parser.add_argument("--premake-months", type=int, default=partitions.DEFAULT_PREMAKE_MONTHS,
                        help="months made ahead (default %(default)s)")
    parser.add_argument("--batch-rows", type=int, default=5000, help="rows copied per transaction")
    parser.add_argument("--lock-timeout", type=float, default=10,
                        help="seconds to wait for a lock (the swap's, the drop's) before trying again")
    parser.add_argument("--drop-old", action="store_true",
                        help="after partitioning: drop the old tables (emails_old, ...) the step kept")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(argv)
    try:
        config = load(options.config)
    except ConfigError as e:
        print(f"mailsvc: configuration error: {e}", file=sys.stderr)
        return 2
    if not config.database.dsn:
        print("mailsvc: database.dsn is empty: the embedded cluster is never partitioned (it has no pg_partman,"
              " and a small installation does not need it)", file=sys.stderr)
        return 2
    try:
        if options.drop_old:
            partitions.drop_old(config.database.dsn, options.lock_timeout)
        else:
            partitions.partition(config.database.dsn, options.retention_months, options.premake_months,
                                 options.batch_rows, options.lock_timeout)
    except partitions.PartitionError as e:
        print(f"mailsvc: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
