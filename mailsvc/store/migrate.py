"""
Schema migrations: numbered SQL files in ``migrations/``, applied in order in one transaction
under an advisory lock (so several nodes starting together apply each file once), recorded in
``schema_migrations``. A released file is never edited; a new change is a new file.
"""

from __future__ import annotations

import re
from importlib import resources

from twisted.logger import Logger

from mailsvc.store.database import Database, Transaction

log = Logger()

#: The advisory lock of schema changes: migrations, and the time partitions step (store/partitions.py).
MIGRATIONS_LOCK = 0x6D61696C  # "mail"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(Exception):
    pass


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every packaged migration, in order."""
    found = []
    for entry in resources.files("mailsvc.store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"migration numbers are not 1..n without gaps: {versions}")
    return found


SCHEMA_VERSION = len(migration_files())


async def migrate(db: Database) -> list[int]:
    """Bring the schema up to date; returns the versions applied now."""
    files = migration_files()

    async def apply(txn: Transaction) -> list[int]:
        await txn.lift_deadlines()  # a migration, or the wait for another node's, may take long
        await txn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATIONS_LOCK,))
        await txn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        rows = await txn.fetchall("SELECT version FROM schema_migrations")
        applied = {row["version"] for row in rows}
        newer = {v for v in applied if v > len(files)}
        if newer:
            raise MigrationError(
                f"the database has schema version {max(newer)}, newer than this code "
                f"({len(files)}); refusing to run"
            )
        done = []
        for version, name, sql in files:
            if version in applied:
                continue
            await txn.execute(sql)
            await txn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            done.append(version)
        return done

    done = await db.run("migrate", apply)
    if done:
        log.info("applied migrations {versions}", versions=done)
    return done
