"""
Other accounts' data, made in SQL before a benchmark measures one account: what a node that
has run for a while holds besides the account under test. ``--background-contacts`` contacts
(a million by default, with two properties each) spread over accounts of
``--background-per-account`` (500) each: every contact with its ``contact.created`` event
(fanned out long ago; with ``--background-backlog``, not yet), 6 % on their account's
suppression list, every account with a segment holding half its contacts, every tenth account
with a webhook and a delivered attempt per event; and ``--background-deferred`` (10,000)
deferred deliveries (due over the next six hours, so nothing here is attempted during a run)
of as many queued e-mails, each with its events. Then ``VACUUM ANALYZE``, as autovacuum would
have left a live system.

Ids are time-ordered like the service's UUIDv7 (48 bits of milliseconds first), a day old.
"""

from __future__ import annotations

import argparse
import collections
import threading
import time

#: A UUIDv7 shape from an integer ``n`` and a base in milliseconds, as the service makes them.
_UUID = ("(lpad(to_hex({ms} + {n}), 12, '0') || '7' || lpad(to_hex({n} %% 4096), 3, '0')"
         " || '{variant}' || lpad(to_hex({n}), 15, '0'))::uuid")


def uuid7(n: str, variant: str, ms: str = "(extract(epoch FROM now() - interval '1 day') * 1000)::bigint") -> str:
    """SQL for a time-ordered id of row ``n``; ``variant`` (8, 9, a or b) keeps tables' ids apart."""
    return _UUID.format(ms=ms, n=n, variant=variant)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--background", action="store_true",
                        help="first fill other accounts with data (bench/background.py)")
    parser.add_argument("--background-contacts", type=int, default=1_000_000, help="their contacts")
    parser.add_argument("--background-per-account", type=int, default=500, help="contacts per account")
    parser.add_argument("--background-deferred", type=int, default=10_000, help="their deferred deliveries")
    parser.add_argument("--background-backlog", action="store_true",
                        help="their contacts' events not fanned out yet (as just written by their imports)")


def fill_from(args: argparse.Namespace, db) -> None:
    """fill() as the options of add_arguments() say, if --background was given."""
    if args.background:
        fill(db, args.background_contacts, args.background_per_account, args.background_deferred,
             args.background_backlog)


def fill(db, contacts: int, per_account: int, deferred: int, backlog: bool = False) -> None:
    """The other accounts and their data, on ``db`` (a psycopg2 connection in autocommit mode);
    with ``backlog``, their contacts' events wait for the webhook dispatcher's fan-out."""
    started = time.monotonic()
    accounts = max(1, contacts // per_account)
    with db.cursor() as cur:
        def run(statement: str, args=()) -> None:
            cur.execute(statement, args)

        run(f"""CREATE TEMP TABLE background_accounts AS
            SELECT n - 1 AS k, {uuid7('n', 'b')} AS id FROM generate_series(1, %s) AS n""", (accounts,))
        run("""INSERT INTO tenants (id, name, plan, sandbox, daily_quota, monthly_quota, send_rate_per_sec,
                                    api_rate_per_sec, created_at, updated_at)
            SELECT id, 'background ' || k, 'growth', false, 100000, 3000000, 100, 100, now(), now()
            FROM background_accounts""")
        _contacts(run, contacts, accounts, backlog)
        _webhooks(run)
        _deferred(run, deferred, accounts)
        run("DROP TABLE background_accounts")
    with db.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
        cur.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        size = cur.fetchone()[0]
    print(f"background: {contacts:,} contacts of {accounts:,} accounts, their events and webhooks, "
          f"{deferred:,} deferred deliveries; database {size}; {time.monotonic() - started:.0f} s", flush=True)


def _contacts(run, contacts: int, accounts: int, backlog: bool) -> None:
    run(f"""INSERT INTO contacts (id, tenant_id, email, first_name, last_name, properties, created_at, updated_at)
        SELECT {uuid7('n', '8')}, a.id, 'c' || n || '@a' || a.k || '.example.org', 'First' || n %% 997,
               'Last' || n %% 991, jsonb_build_object('plan', CASE WHEN n %% 3 = 0 THEN 'free' ELSE 'pro' END,
                                                      'seats', n %% 50),
               now() - interval '1 day', now() - interval '1 day'
        FROM generate_series(1, %s) AS n JOIN background_accounts a ON a.k = (n - 1)::bigint * %s / %s""",
        (contacts, accounts, contacts))
    run("""INSERT INTO contact_property_types (tenant_id, key, type)
        SELECT id, key, type FROM background_accounts,
               (VALUES ('plan', 'string'), ('seats', 'number')) AS t (key, type)""")
    run("""INSERT INTO segments (id, tenant_id, name, created_at, updated_at)
        SELECT id, id, 'customers', now(), now() FROM background_accounts""")
    run("""INSERT INTO segment_contacts (segment_id, contact_id, created_at)
        SELECT tenant_id, id, now() FROM contacts
        WHERE tenant_id IN (SELECT id FROM background_accounts) AND right(id::text, 1) IN ('0', '2', '4', '6',
              '8', 'a', 'c', 'e')""")
    run("""INSERT INTO suppressions (id, tenant_id, email, origin, created_at)
        SELECT (left(id::text, 19) || 'a' || right(id::text, 16))::uuid, tenant_id, email,
               CASE WHEN right(id::text, 1) < 'c' THEN 'unsubscribe' ELSE 'hard_bounce' END, now()
        FROM contacts WHERE tenant_id IN (SELECT id FROM background_accounts) AND substr(id::text, 35, 1) = '0'""")
    _events(run, """INSERT INTO events (id, tenant_id, type, data, created_at)
        SELECT (left(id::text, 19) || '9' || right(id::text, 16))::uuid, tenant_id, 'contact.created',
               jsonb_build_object('id', id::text, 'email', email, 'first_name', first_name,
                                  'last_name', last_name, 'unsubscribed', false),
               created_at
        FROM contacts WHERE tenant_id IN (SELECT id FROM background_accounts)""", handed_over=not backlog)


def _events(run, insert: str, *, handed_over: bool) -> None:
    """Events written as fanned out long ago (the hand-over's trigger off while they are
    written), or left in the webhook hand-over as just written."""
    if handed_over:
        run("ALTER TABLE events DISABLE TRIGGER webhook_handover_queue")
    run(insert)
    if handed_over:
        run("ALTER TABLE events ENABLE TRIGGER webhook_handover_queue")


def _webhooks(run) -> None:
    run("""INSERT INTO webhooks (id, tenant_id, endpoint, events, secret, created_at, updated_at)
        SELECT id, id, 'http://127.0.0.1:9/hook', ARRAY['contact.created', 'email.delivered'],
               '\\x00'::bytea, now() - interval '2 days', now() - interval '2 days'
        FROM background_accounts WHERE k %% 10 = 0""")
    run("""INSERT INTO webhook_deliveries (webhook_id, event_id, tenant_id, state, attempts, due_at,
                                           last_attempt_at, last_status, created_at)
        SELECT w.id, e.id, e.tenant_id, 'delivered', 1, e.created_at, e.created_at, 200, e.created_at
        FROM webhooks w JOIN events e ON e.tenant_id = w.tenant_id
        WHERE w.tenant_id IN (SELECT id FROM background_accounts)""")


def _deferred(run, deferred: int, accounts: int) -> None:
    run(f"""INSERT INTO emails (id, tenant_id, message_id, sender, recipients, subject, status, last_event,
                                message, source, created_at)
        SELECT {uuid7('n', 'a')}, a.id, '<bg' || n || '@a' || a.k || '.example.org>',
               'news@a' || a.k || '.example.org', jsonb_build_object('to', jsonb_build_array('r' || n || '@x.test')),
               'Hello', 'queued', 'delivery_delayed', 'Subject: Hello\r\n\r\nHello'::bytea, 'api',
               now() - interval '1 hour'
        FROM generate_series(1, %s) AS n JOIN background_accounts a ON a.k = n %% %s""", (deferred, accounts))
    run("""INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, attempts, due_at, updated_at,
                                   retry_until, last_response)
        SELECT (left(e.id::text, 19) || 'b' || right(e.id::text, 16))::uuid, e.id, e.tenant_id,
               e.recipients -> 'to' ->> 0, 'deferred', 1 + n %% 5,
               now() + interval '10 minutes' + (n %% 360) * interval '1 minute', now(),
               now() + interval '71 hours', '451 4.7.1 greylisted, try again later'
        FROM (SELECT id, tenant_id, recipients, row_number() OVER () AS n FROM emails
              WHERE tenant_id IN (SELECT id FROM background_accounts)) e""")
    _events(run, """INSERT INTO events (id, tenant_id, type, data, created_at)
        SELECT (left(e.id::text, 19) || k.v || right(e.id::text, 16))::uuid, e.tenant_id, k.type,
               jsonb_build_object('email_id', e.id::text, 'to', e.recipients -> 'to'), e.created_at
        FROM emails e, (VALUES ('a', 'email.sent'), ('b', 'email.delivery_delayed')) AS k (v, type)
        WHERE e.tenant_id IN (SELECT id FROM background_accounts)""", handed_over=True)


class Statements:
    """
    What the cluster's backends run while a measurement runs: pg_stat_activity sampled every
    10 ms on a connection of its own (no preloaded extension needed), the share of samples in
    which each statement (its first 100 characters) was active, and each table's scans.
    """

    TABLES = "SELECT relname, seq_scan, seq_tup_read, idx_scan, n_tup_upd - n_tup_hot_upd FROM pg_stat_user_tables"

    def __init__(self, dsn: str):
        import psycopg2

        self.db = psycopg2.connect(dsn)
        self.db.autocommit = True
        self.stop = threading.Event()
        self.counts: collections.Counter = collections.Counter()
        self.samples = 0

    def __enter__(self) -> Statements:
        self.before = self._tables()
        self.thread = threading.Thread(target=self._sample)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        after = self._tables()
        print(f"statements active in {self.samples:,} samples of pg_stat_activity:")
        for statement, n in self.counts.most_common(8):
            print(f"  {n / max(self.samples, 1):6.1%}  {statement}")
        print(f"  {'table':24} {'seq scans':>9} {'rows read':>10} {'idx scans':>9} {'non-HOT upd':>11}")
        for table, now in sorted(after.items()):
            delta = [a - b for a, b in zip(now, self.before.get(table, (0, 0, 0, 0)), strict=True)]
            if any(delta):
                print(f"  {table:24} " + " ".join(f"{v:>{w},}" for v, w in zip(delta, (9, 10, 9, 11), strict=True)))
        self.db.close()

    def _tables(self) -> dict[str, tuple]:
        with self.db.cursor() as cur:
            cur.execute(self.TABLES)
            return {row[0]: tuple(v or 0 for v in row[1:]) for row in cur.fetchall()}

    def _sample(self) -> None:
        with self.db.cursor() as cur:
            while not self.stop.is_set():
                cur.execute("SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_activity"
                            " WHERE state = 'active' AND pid <> pg_backend_pid() AND datname = current_database()")
                self.samples += 1
                for (statement,) in cur.fetchall():
                    # One batch's rows differ in their values only.
                    self.counts[statement.split("jsonb_to_recordset(")[0]] += 1
                self.stop.wait(0.01)
