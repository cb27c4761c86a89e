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

_LOCK = 0x6D61696C  # "mail"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


#: Numbers taken by work on other branches that is not merged here yet (contacts: 11, the
#: builder: 12): they may be missing, and are applied whenever they arrive, even after a
#: higher one (``migrate`` applies every file whose number is not recorded). Emptied once
#: every reserved number has landed.
RESERVED = frozenset({11, 12})


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
    expected = [v for v in range(1, (versions[-1] if versions else 0) + 1) if v in versions or v not in RESERVED]
    if versions != expected:
        raise MigrationError(f"migration numbers are not 1..n without gaps: {versions}")
    return found


#: The numbers of the packaged migrations, and the highest.
SCHEMA_VERSIONS = [v for v, _, _ in migration_files()]
SCHEMA_VERSION = SCHEMA_VERSIONS[-1]


async def migrate(db: Database) -> list[int]:
    """Bring the schema up to date; returns the versions applied now."""
    files = migration_files()

    async def apply(txn: Transaction) -> list[int]:
        await txn.lift_deadlines()  # a migration, or the wait for another node's, may take long
        await txn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await txn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        rows = await txn.fetchall("SELECT version FROM schema_migrations")
        applied = {row["version"] for row in rows}
        newer = {v for v in applied if v > files[-1][0]}
        if newer:
            raise MigrationError(
                f"the database has schema version {max(newer)}, newer than this code "
                f"({files[-1][0]}); refusing to run"
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
