"""
Time partitions (docs/operations.md, "Time partitions"): the opt-in step that turns ``emails``,
``events``, ``deliveries`` and ``attachments`` into tables partitioned by month of UUIDv7 ids
while the nodes keep running. The step is an operator's command on one connection of its own
(it holds the migrations' advisory lock from start to end), so it is plain psycopg2, not the
node's pool. It installs the months' functions that the hourly maintenance then calls
(``store/partition_maintenance.py``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg2
import psycopg2.extensions
from psycopg2 import errors as pgerrors
from psycopg2 import sql

from mailsvc.store.migrate import MIGRATIONS_LOCK
from mailsvc.store.partition_maintenance import FUNCTIONS

#: The schema version this step was written for: a later migration that changes these tables
#: must be checked against the partitioned layout before the step may run on it.
WRITTEN_FOR_SCHEMA = 30

#: Partitioned tables, in copy order (an e-mail before its deliveries and attachments), with
#: the column they are partitioned on and their primary key. A delivery or an attachment lives
#: in its e-mail's month (its own id may fall in the next one), so a month of e-mails is dropped
#: with everything that references it.
TABLES = {
    "emails": ("id", ("id",)),
    "events": ("id", ("id",)),
    "deliveries": ("email_id", ("id", "email_id")),
    "attachments": ("email_id", ("id", "email_id")),
}

T = TypeVar("T")

DEFAULT_RETENTION_MONTHS = 13
DEFAULT_PREMAKE_MONTHS = 3

#: While rows are copied, every change to the old tables is noted here and applied again.
CHANGE_LOG = """
CREATE TABLE mailsvc_partition_changes (relation text NOT NULL, id uuid NOT NULL);
CREATE OR REPLACE FUNCTION mailsvc_partition_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mailsvc_partition_changes
    VALUES (TG_TABLE_NAME, CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
    RETURN NULL;
END
$$;
"""

SETTINGS = """
CREATE TABLE storage_settings (
    only_row         boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    partitioned      boolean NOT NULL,
    retention_months integer NOT NULL CHECK (retention_months > 0),
    premake_months   integer NOT NULL CHECK (premake_months >= 0),
    partitioned_at   timestamptz NOT NULL DEFAULT now()
)
"""

_INDEX = re.compile(r"^CREATE INDEX (\S+) ON (\S+) USING (.*)$")


class PartitionError(Exception):
    """The step refuses to run (the message says why)."""


def partition(
    dsn: str,
    retention_months: int = DEFAULT_RETENTION_MONTHS,
    premake_months: int = DEFAULT_PREMAKE_MONTHS,
    batch_rows: int = 5000,
    lock_timeout: float = 10,
    say: Callable[[str], None] = print,
    meanwhile: Callable[[str], None] | None = None,
) -> bool:
    """
    Partition the tables of the database at ``dsn``; False when they already are. ``meanwhile``
    is called after each table's copy ("emails copied", ...) and before the exclusive lock
    ("swapping"): a test changes rows there.
    """
    if retention_months < 1 or premake_months < 0 or batch_rows < 1:
        raise PartitionError("retention must be at least one month, premake and batches not negative")
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (MIGRATIONS_LOCK,))
            conn.commit()
            if _partitioned(cur):
                conn.rollback()
                say("the tables are partitioned already: nothing to do")
                return False
            _check_schema(cur)
            _act_as_owner(cur)
            _bounded(conn, cur, lock_timeout, lambda: _forget_unfinished(cur), say)
            layout, ties = _bounded(conn, cur, lock_timeout, lambda: _prepare(cur, premake_months, say), say)
            try:
                for table in TABLES:
                    copied = _copy(conn, cur, table, layout[table], batch_rows)
                    say(f"{table}: {copied} rows copied")
                    if meanwhile is not None:
                        meanwhile(f"{table} copied")
                _bounded(conn, cur, lock_timeout, lambda: _tie(cur, layout, ties), say)
                for _ in range(3):  # what changed meanwhile, so the exclusive lock has little left to do
                    if _catch_up(conn, cur, layout) < batch_rows:
                        break
                if meanwhile is not None:
                    meanwhile("swapping")
                repointed = _swap(conn, cur, layout, retention_months, premake_months, lock_timeout, say)
            except BaseException:
                # The triggers would note changes for good: take them and the copies away.
                conn.rollback()
                _bounded(conn, cur, lock_timeout, lambda: _forget_unfinished(cur), say)
                raise
            for table, constraint in repointed:
                cur.execute(sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(
                    sql.Identifier(table), sql.Identifier(constraint)))
                conn.commit()
            say(f"partitioned by month: {', '.join(TABLES)}; retention {retention_months} months;"
                f" the old tables are kept as {', '.join(t + '_old' for t in TABLES)}")
            return True
    finally:
        conn.close()  # and with it the advisory lock


def drop_old(dsn: str, lock_timeout: float = 10, say: Callable[[str], None] = print) -> None:
    """
    Drop the tables the step left behind, once the partitioned ones have been checked (their
    keys to ``tenants`` and ``domains`` go with them: those tables are locked for an instant).
    """
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (MIGRATIONS_LOCK,))
            conn.commit()
            if not _partitioned(cur):
                raise PartitionError("the tables are not partitioned: there are no old tables to drop")
            _act_as_owner(cur)
            for table in TABLES:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table + "_old",))
                if _the_row(cur)[0]:
                    cur.execute(sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT count(*) FROM {})").format(
                        sql.Identifier(table + "_old"), sql.Identifier(table)))
                    old, new = _the_row(cur)
                    say(f"{table}_old: {old} rows ({table}: {new}); dropped")
            conn.commit()
            _bounded(conn, cur, lock_timeout, lambda: cur.execute(
                "DROP TABLE IF EXISTS attachments_old, deliveries_old, emails_old, events_old"), say)
    finally:
        conn.close()


def _partitioned(cur) -> bool:
    cur.execute("SELECT to_regclass('storage_settings') IS NOT NULL")
    if not cur.fetchone()[0]:
        return False
    cur.execute("SELECT partitioned FROM storage_settings")
    row = cur.fetchone()
    return bool(row and row[0])


def _check_schema(cur) -> None:
    cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
    version = None
    if cur.fetchone()[0]:
        cur.execute("SELECT max(version) FROM schema_migrations")
        version = cur.fetchone()[0]
    if version != WRITTEN_FOR_SCHEMA:
        raise PartitionError(
            f"the database has schema version {version}; this step was written for {WRITTEN_FOR_SCHEMA}"
            " (start the nodes of this version first, or use the step of the database's version)")


def _the_row(cur: psycopg2.extensions.cursor) -> tuple[Any, ...]:
    """The row of a statement that always returns one (an aggregate, a function's value)."""
    row = cur.fetchone()
    if row is None:
        raise LookupError("no row from a statement that always returns one")
    return row


def _act_as_owner(cur) -> None:
    """Create what the nodes use as the role that owns the tables (they run as it)."""
    cur.execute("SELECT tableowner FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'emails'")
    (owner,) = cur.fetchone()
    cur.execute("SELECT current_user")
    if cur.fetchone()[0] != owner:
        cur.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner)))


def _forget_unfinished(cur) -> None:
    """What a run that stopped halfway left (it changed nothing the nodes use)."""
    for table in TABLES:
        cur.execute(sql.SQL("DROP TRIGGER IF EXISTS mailsvc_partition_note ON {}").format(sql.Identifier(table)))
    cur.execute("DROP TABLE IF EXISTS attachments_p, deliveries_p, emails_p, events_p, mailsvc_partition_changes")
    cur.execute("DROP FUNCTION IF EXISTS mailsvc_partition_note()")


def _bounded(conn, cur, lock_timeout: float, step: Callable[[], T], say: Callable[[str], None],
             attempts: int | None = None, between: Callable[[], object] | None = None) -> T:
    """
    ``step`` in a transaction of its own that waits at most ``lock_timeout`` seconds for a lock
    (the nodes' statements queue behind a lock waited for), tried again until it gets them and
    does not conflict with the nodes' writes (``attempts`` times at most), ``between`` the tries.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            cur.execute("SET LOCAL lock_timeout = %s", (f"{max(1, int(lock_timeout * 1000))}ms",))
            result = step()
            conn.commit()
            return result
        except (pgerrors.LockNotAvailable, pgerrors.SerializationFailure):
            conn.rollback()
            say(f"the tables are busy; trying again ({attempt})")
            if attempts is not None and attempt >= attempts:
                raise PartitionError("the tables stayed busy: their locks were not had; nothing was swapped") from None
            if between is not None:
                between()


def _columns(cur, table: str) -> list[str]:
    cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
                " AND NOT attisdropped ORDER BY attnum", (table,))
    return [name for (name,) in cur.fetchall()]


def _prepare(cur, premake_months: int, say: Callable[[str], None]) -> tuple[dict[str, list[str]], list[tuple]]:
    """
    The functions, the change log and its triggers, and the empty partitioned tables with their
    indexes, foreign keys and months (the oldest row's to ``premake_months`` ahead); the columns
    of each table, and the foreign keys to ``emails_p`` left to ``_tie``.
    """
    cur.execute(FUNCTIONS)
    for table in ("emails", "events"):
        cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE substr(id::text, 15, 1) <> '7'").format(
            sql.Identifier(table)))
        if cur.fetchone()[0]:
            raise PartitionError(f"{table} has ids that are no UUIDv7: they cannot be placed in a month")
    cur.execute(CHANGE_LOG)
    layout, ties = {}, []
    for table, (key, primary_key) in TABLES.items():
        layout[table] = _columns(cur, table)
        cur.execute(sql.SQL(
            "CREATE TRIGGER mailsvc_partition_note AFTER INSERT OR UPDATE OR DELETE ON {}"
            " FOR EACH ROW EXECUTE FUNCTION mailsvc_partition_note()").format(sql.Identifier(table)))
        new = sql.Identifier(table + "_p")
        cur.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL EXCLUDING INDEXES) PARTITION BY RANGE ({})").format(
            new, sql.Identifier(table), sql.Identifier(key)))
        cur.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})").format(
            new, sql.Identifier(table + "_pkey_p"), sql.SQL(", ").join(map(sql.Identifier, primary_key))))
        cur.execute("SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisunique FROM pg_index i"
                    " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass AND NOT i.indisprimary",
                    (table,))
        for name, definition, unique in cur.fetchall():
            match = _INDEX.match(definition)
            if unique or match is None:
                raise PartitionError(f"index {name} cannot be kept on a partitioned table: {definition}")
            cur.execute(sql.SQL("CREATE INDEX {} ON {} USING ").format(sql.Identifier(name + "_p"), new)
                        + sql.SQL(match.group(3)))
        cur.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                    " WHERE conrelid = %s::regclass AND contype = 'f'", (table,))
        for name, definition in cur.fetchall():
            to_emails = re.sub(r"REFERENCES (\w+\.)?emails\(", "REFERENCES emails_p(", definition)
            if to_emails != definition:
                ties.append((table + "_p", name, to_emails))
            else:
                cur.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(new, sql.Identifier(name))
                            + sql.SQL(definition))
    cur.execute("SELECT date_trunc('month', least(min(uuid7_time(id)), now()) AT TIME ZONE 'UTC'),"
                " date_trunc('month', greatest(max(uuid7_time(id)), now()) AT TIME ZONE 'UTC')"
                " + make_interval(months => %s)"
                " FROM (VALUES ((SELECT id FROM emails ORDER BY id LIMIT 1)),"
                "  ((SELECT id FROM events ORDER BY id LIMIT 1)),"
                "  ((SELECT id FROM emails ORDER BY id DESC LIMIT 1)),"
                "  ((SELECT id FROM events ORDER BY id DESC LIMIT 1))) AS ends (id)",
                (premake_months,))
    first, last = cur.fetchone()
    cur.execute("SELECT mailsvc_create_month(t || '_p', t || to_char(m, '_YYYY_MM'), m)"
                " FROM generate_series(%s::timestamp, %s::timestamp, interval '1 month') AS m,"
                " unnest(%s::text[]) AS t", (first, last, list(TABLES)))
    say(f"partitions from {first:%Y-%m} to {last:%Y-%m} made")
    return layout, ties


def _copy(conn, cur, table: str, columns: list[str], batch_rows: int) -> int:
    """
    Copy ``table`` into its partitioned twin in batches of ids, each its own transaction.
    Deliveries and attachments are copied before their key to ``emails_p`` exists (``_tie``):
    checked row by row against the partitioned e-mails, they were copied five times slower.
    """
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    picked = sql.SQL(", ").join(sql.SQL("b.{}").format(sql.Identifier(c)) for c in columns)
    statement = sql.SQL(
        "WITH b AS (SELECT * FROM {old} WHERE id > %s ORDER BY id LIMIT %s),"
        " copied AS (INSERT INTO {new} ({names}) SELECT {picked} FROM b RETURNING 1)"
        " SELECT (SELECT id FROM b ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM copied)").format(
        old=sql.Identifier(table), new=sql.Identifier(table + "_p"), names=names, picked=picked)
    after, total = "00000000-0000-0000-0000-000000000000", 0
    while True:
        cur.execute(statement, (after, batch_rows))
        last, copied = cur.fetchone()
        conn.commit()
        total += copied
        if last is None:
            return total
        after = last


def _catch_up(conn, cur, layout: dict[str, list[str]]) -> int:
    """
    The noted changes applied in a REPEATABLE READ transaction while the nodes write, so an
    e-mail and its deliveries of one accept are both seen or both not; how many rows.
    """
    for attempt in range(5):
        try:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            applied = _apply_all(cur, layout)
            conn.commit()
            return applied
        except pgerrors.SerializationFailure:
            conn.rollback()
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def _tie(cur, layout: dict[str, list[str]], ties: list[tuple]) -> None:
    """
    The copies made consistent (the noted changes applied, in one snapshot), then the keys of
    deliveries and attachments to ``emails_p`` added, each checked in one pass.
    """
    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    _apply_all(cur, layout)
    for table, name, definition in ties:
        cur.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(sql.Identifier(table), sql.Identifier(name))
                    + sql.SQL(definition))


def _apply_all(cur, layout: dict[str, list[str]]) -> int:
    """Apply the noted changes (upsert what exists, delete what is gone), tables in copy order."""
    return sum(_apply_changes(cur, table, columns) for table, columns in layout.items())


def _apply_changes(cur, table: str, columns: list[str]) -> int:
    _, primary_key = TABLES[table]
    old, new = sql.Identifier(table), sql.Identifier(table + "_p")
    updated = [c for c in columns if c not in primary_key]
    cur.execute(sql.SQL(
        "WITH changed AS (DELETE FROM mailsvc_partition_changes WHERE relation = %s RETURNING id),"
        " ids AS (SELECT DISTINCT id FROM changed),"
        " gone AS (DELETE FROM {new} n USING ids WHERE n.id = ids.id"
        "          AND NOT EXISTS (SELECT 1 FROM {old} o WHERE o.id = ids.id) RETURNING 1),"
        " kept AS (INSERT INTO {new} ({names}) SELECT {picked} FROM {old} o JOIN ids ON o.id = ids.id"
        "          ON CONFLICT ({key}) DO UPDATE SET {updates} RETURNING 1)"
        " SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM kept)").format(
        old=old, new=new,
        names=sql.SQL(", ").join(map(sql.Identifier, columns)),
        picked=sql.SQL(", ").join(sql.SQL("o.{}").format(sql.Identifier(c)) for c in columns),
        key=sql.SQL(", ").join(map(sql.Identifier, primary_key)),
        updates=sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updated),
    ), (table,))
    return cur.fetchone()[0]


def _referencing(cur) -> list[tuple[str, str, str]]:
    """Foreign keys of other tables to these (``webhook_deliveries.event_id``)."""
    cur.execute("SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE contype = 'f' AND confrelid = ANY(%s::regclass[]) AND NOT conrelid = ANY(%s::regclass[])",
                (list(TABLES), [*TABLES, *(t + "_p" for t in TABLES)]))
    return cur.fetchall()


def _move_triggers(cur) -> list[str]:
    """
    Drop the tables' own triggers (the webhook hand-over's on ``events``, the queue counts' on
    ``deliveries``) and return their
    definitions, to be made again on the partitioned tables once they carry the names: the
    copies were made without them, so copying queued nothing.
    """
    cur.execute("SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger"
                " WHERE tgrelid = ANY(%s::regclass[]) AND NOT tgisinternal AND tgname <> 'mailsvc_partition_note'",
                (list(TABLES),))
    found = cur.fetchall()
    for table, name, _ in found:
        cur.execute(sql.SQL("DROP TRIGGER {} ON {}").format(sql.Identifier(name), sql.Identifier(table)))
    return [definition for _, _, definition in found]


def _swap(conn, cur, layout, retention_months: int, premake_months: int, lock_timeout: float,
          say: Callable[[str], None]) -> list[tuple[str, str]]:
    """
    Under an exclusive lock of the tables: the last changes, the names swapped, the other
    tables' foreign keys pointed at the new tables (NOT VALID: validated after, unlocked), the
    settings written. Ten tries of ``lock_timeout`` seconds, changes caught up between them.
    """
    locked_at: list[float] = []
    repointed = _bounded(conn, cur, lock_timeout,
                         lambda: _swapped(cur, layout, retention_months, premake_months, locked_at), say,
                         attempts=10, between=lambda: _catch_up(conn, cur, layout))
    say(f"the tables were locked exclusively for {time.monotonic() - locked_at[-1]:.3f} s")
    return repointed


def _swapped(cur, layout, retention_months: int, premake_months: int, locked_at: list[float]) -> list[tuple[str, str]]:
    referencing = _referencing(cur)
    locked = sorted({*TABLES, *(t for t, _, _ in referencing)})
    cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
        sql.SQL(", ").join(map(sql.Identifier, locked))))
    locked_at.append(time.monotonic())
    _apply_all(cur, layout)
    triggers = _move_triggers(cur)
    for table in TABLES:
        cur.execute(sql.SQL("DROP TRIGGER mailsvc_partition_note ON {}").format(sql.Identifier(table)))
        for suffix, rename in (("", "_old"), ("_p", "")):
            cur.execute("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                        " WHERE i.indrelid = %s::regclass", (table + suffix,))
            for (index,) in cur.fetchall():
                renamed = (index + rename) if suffix == "" else index.removesuffix("_p")
                cur.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(index), sql.Identifier(renamed)))
            cur.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                sql.Identifier(table + suffix), sql.Identifier(table + rename)))
    for definition in triggers:
        cur.execute(definition)
    cur.execute("DROP TABLE mailsvc_partition_changes")
    cur.execute("DROP FUNCTION mailsvc_partition_note()")
    repointed = []
    for table, name, definition in referencing:
        cur.execute(sql.SQL("ALTER TABLE {0} DROP CONSTRAINT {1}, ADD CONSTRAINT {1} ").format(
            sql.Identifier(table), sql.Identifier(name)) + sql.SQL(definition) + sql.SQL(" NOT VALID"))
        repointed.append((table, name))
    cur.execute(SETTINGS)
    cur.execute("INSERT INTO storage_settings (partitioned, retention_months, premake_months) VALUES (true, %s, %s)",
                (retention_months, premake_months))
    return repointed
