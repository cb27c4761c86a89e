"""
Time partitions (docs/operations.md, "Time partitions"): mail of past months written through the
real accept path (ids made on a clock set back), the opt-in step run while the application
keeps writing, then the store's reads and writes, premake and retention on the partitioned
layout; and the plain layout left alone when nobody opted in.
"""

import base64
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg2
import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, threads
from twisted.internet.threads import blockingCallFromThread

from mailsvc import ids
from mailsvc.app import suppressions
from mailsvc.config import load
from mailsvc.store import deliveries, partition_maintenance, partitions, webhooks
from mailsvc.store.deliveries import Outcome
from tests.helpers.polling import async_until
from tests.helpers.sending import BODY, sending_tenant
from tests.integration.test_queue_counts import agree

TABLES = ("emails", "events", "deliveries", "attachments", "webhook_deliveries")
MAIL = {**BODY, "to": ["ann@example.com", "bob@example.com"],
        "attachments": [{"filename": "a.txt", "content": base64.b64encode(b"attached").decode()}]}


@pytest.fixture
def config(dns_server):
    """The webhook's endpoint resolves (to a public address) through the test DNS server."""
    dns_server.a("hooks.example.com", "8.8.8.8")
    return dns_server.configure(load(None, environ={}))


class SetClock:
    """The reactor's timers with a time of the test's own: ``ms`` milliseconds, plus ``tick`` at every reading."""

    def __init__(self, ms: int, tick: int = 0):
        self.ms, self.tick = ms, tick

    def seconds(self) -> float:
        now = self.ms
        self.ms += self.tick
        return (now + 0.5) / 1000  # within the millisecond, whatever the float rounds to

    def callLater(self, delay, fn, *args, **kwargs):  # noqa: N802 (Twisted's name)
        return reactor.callLater(delay, fn, *args, **kwargs)


class SubmitClock:
    """The accept path's clock (``compose.assemble``'s ``submit_clock``): the reactor's, or the
    ``SetClock`` of one request; the rest of the application keeps the reactor's time, its rate
    limits included."""

    def __init__(self):
        self.set_back: SetClock | None = None

    def seconds(self) -> float:
        return (self.set_back or reactor).seconds()

    def callLater(self, delay, fn, *args, **kwargs):  # noqa: N802 (Twisted's name)
        return reactor.callLater(delay, fn, *args, **kwargs)


@pytest.fixture
def submit_clock() -> SubmitClock:
    return SubmitClock()


@pytest.fixture
def assembly(submit_clock) -> dict:
    return {"submit_clock": submit_clock}


def ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


def month(offset: int, day: int = 1, hour: int = 0) -> datetime:
    """The UTC month ``offset`` months from this one, at ``day`` and ``hour``."""
    now = datetime.now(UTC)
    index = now.year * 12 + now.month - 1 + offset
    return datetime(index // 12, index % 12 + 1, day, hour, tzinfo=UTC)


def month_of(value: uuid.UUID) -> str:
    return f"{datetime.fromtimestamp((value.int >> 80) / 1000, UTC):%Y_%m}"


async def send_at(api, submit_clock: SubmitClock, key: str, clock: SetClock, body: dict) -> str:
    """Mail accepted through the API with ids and times of ``clock`` (a process started then)."""
    ids.start_over()  # ids of one process only increase: this one starts over in the past
    submit_clock.set_back = clock
    try:
        code, sent, _ = await api.json("POST", "/emails", key, json=body)
    finally:
        submit_clock.set_back = None
    assert code == 200, sent
    return sent["id"]


async def rows_of(db, table: str) -> list[dict]:
    order = "webhook_id, event_id" if table == "webhook_deliveries" else "id"
    rows = await db.fetchall(f"SELECT * FROM {table} ORDER BY {order}")
    return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()} for row in rows]


async def snapshot(db) -> dict[str, list[dict]]:
    return {table: await rows_of(db, table) for table in TABLES}


async def decide(api, at: datetime, limit: int) -> list:
    """Claim what is due at ``at`` (at most ``limit``) and record it delivered: events of then."""
    clock = SetClock(ms(at))
    ids.start_over()
    token = uuid.uuid4()
    claimed = await deliveries.claim(api.parts.db, clock, "node-a", token, limit, 60)
    outcomes = [Outcome(w.id, w.tenant_id, w.email_id, w.recipient, "delivered", {}, "250 ok", claim=token)
                for w in claimed.work]
    assert await deliveries.record(api.parts.db, clock, outcomes, suppress=suppressions.add_many) == len(outcomes)
    await api.parts.db.run("fan out", webhooks.fan_out, datetime.now(UTC), 100)
    return claimed.work


def config_file(tmp_path, dsn: str) -> str:
    path = tmp_path / "mailsvc.conf"
    path.write_text(f"[database]\ndsn = {dsn}\n")
    return str(path)


def command(*args: str) -> subprocess.CompletedProcess:
    """``python -m mailsvc.partition`` as an operator runs it (no MAILSVC_ settings around)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MAILSVC_")}
    return subprocess.run([sys.executable, "-m", "mailsvc.partition", *args], capture_output=True, text=True,
                          env=environ, timeout=120)


@pt.ensureDeferred
async def test_pg_partman_4_7_cannot_take_a_uuid_control_column(db):
    """Why the maintenance is a function of ours (docs): Debian 12's pg_partman refuses UUIDv7 ids."""
    await db.execute("CREATE SCHEMA partman")
    await db.execute("CREATE EXTENSION pg_partman SCHEMA partman")
    version = await db.fetchone("SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'")
    assert version["extversion"].startswith("4.7")
    await db.execute("CREATE TABLE probe (LIKE emails) PARTITION BY RANGE (id)")
    with pytest.raises(psycopg2.Error, match="only supports partitioning of data types that are integer or date"):
        await db.fetchall("SELECT partman.create_parent('public.probe', 'id', 'native', 'monthly')")


@pt.ensureDeferred
async def test_partitioning_keeps_every_row_and_the_store_works_on_it(api, submit_clock, fresh_dsn, tmp_path):
    db = api.parts.db
    tenant, key, _ = await sending_tenant(api, plan="scale")
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                   json={"send_rate_per_sec": 1000, "daily_quota": 100000, "monthly_quota": 100000})
    code, hook, _ = await api.json("POST", "/webhooks", key, json={
        "endpoint": "https://hooks.example.com/", "events": ["email.delivered"]})
    assert code == 201, hook
    await db.execute("UPDATE webhooks SET created_at = %s", (month(-4),))  # it heard the old months' events
    code, other, _ = await api.json("POST", "/domains", key, json={"name": "other.example.com"})
    assert code in (200, 201), other
    await db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (other["id"],))

    # Three months back, one reading of the clock a millisecond: the e-mail's id tells how many
    # readings come before it, which puts the next one's id on the last millisecond of a month.
    start = ms(month(-3, 10))
    oldest = await send_at(api, submit_clock, key, SetClock(start, 1), MAIL)
    readings = (uuid.UUID(oldest).int >> 80) - start
    older = await send_at(api, submit_clock, key, SetClock(ms(month(-2, 10)), 1), MAIL)
    boundary = await send_at(api, submit_clock, key, SetClock(ms(month(0)) - 1 - readings, 1), MAIL)
    code, current, _ = await api.json("POST", "/emails", key, json=MAIL)
    code, elsewhere, _ = await api.json("POST", "/emails", key, json={**MAIL, "from": "x@other.example.com"})
    assert code == 200, elsewhere
    late = await db.fetchall("SELECT id FROM deliveries WHERE email_id = %s", (boundary,))
    assert month_of(uuid.UUID(boundary)) == month(-1).strftime("%Y_%m")
    assert {month_of(r["id"]) for r in late} == {month(0).strftime("%Y_%m")}  # the month-boundary case
    # Delivered in their months: events (and their webhook deliveries) of then.
    assert len(await decide(api, month(-3, 11), 1)) == 1
    assert len(await decide(api, month(-3, 20), 10)) == 1
    assert len(await decide(api, month(-2, 11), 10)) == 2
    before = await snapshot(db)
    assert len(before["emails"]) == 5 and len(before["attachments"]) == 5 and len(before["deliveries"]) == 10
    assert len(before["webhook_deliveries"]) == 4

    # While the step copies, the application goes on. Once the e-mails are copied: a new e-mail
    # (its deliveries and attachments are copied, the e-mail is not), a domain deleted (a
    # cascaded update of its e-mails).
    # Before the swap: an outcome (an update and an event), old events pruned (deletes,
    # cascading to their webhook deliveries).
    said, during = [], {}

    async def emails_copied() -> None:
        code, during["email"], _ = await api.json("POST", "/emails", key, json=MAIL)
        assert (await api.json("DELETE", f"/domains/{other['id']}", key))[0] == 200

    async def swapping() -> None:
        during["delivered"] = await decide(api, datetime.now(UTC) + timedelta(seconds=1), 1)
        await webhooks.prune(db, month(-3, 15), month(-3, 15))
        during["expected"] = await snapshot(db)

    def meanwhile(stage: str) -> None:
        write = {"emails copied": emails_copied, "swapping": swapping}.get(stage)
        if write is not None:
            blockingCallFromThread(reactor, lambda: defer.ensureDeferred(write()))

    started = time.monotonic()
    assert await threads.deferToThread(partitions.partition, fresh_dsn, batch_rows=2, say=said.append,
                                       meanwhile=meanwhile)
    took = time.monotonic() - started
    assert "emails: 5 rows copied" in said and "deliveries: 12 rows copied" in said, said
    after = await snapshot(db)
    assert after == during["expected"], "rows differ after the swap"
    await agree(db, datetime.now(UTC))  # the queue's counts, kept by the partitioned table from now on
    assert [r["created_at"] for r in after["events"] if r["created_at"] < month(-3, 15)] == []  # pruned
    (delivered,) = during["delivered"]
    assert [r["type"] for r in after["events"] if r["data"].get("delivery_id") == str(delivered.id)] == [
        "email.delivered"]
    assert during["email"]["id"] in {str(r["id"]) for r in after["emails"]}
    assert {r["domain_id"] for r in after["emails"] if str(r["id"]) == elsewhere["id"]} == {None}
    assert len(after["webhook_deliveries"]) == 4

    # The layout: partitioned tables, each row in the month of its id (deliveries and
    # attachments in their e-mail's), the webhook deliveries' key checked against the new events.
    kinds = await db.fetchall("SELECT relname, relkind FROM pg_class WHERE relname = ANY(%s)",
                              (["emails", "events", "deliveries", "attachments", "emails_old"],))
    assert {r["relname"]: r["relkind"] for r in kinds} == {
        "emails": "p", "events": "p", "deliveries": "p", "attachments": "p", "emails_old": "r"}
    for table, key_column in (("emails", "id"), ("events", "id"), ("deliveries", "email_id"),
                              ("attachments", "email_id")):
        placed = await db.fetchall(f"SELECT tableoid::regclass::text AS part, {key_column} AS key FROM {table}")
        assert placed and all(r["part"] == f"{table}_{month_of(r['key'])}" for r in placed), placed
    placed = await db.fetchall("SELECT tableoid::regclass::text AS part FROM deliveries WHERE email_id = %s",
                               (boundary,))
    assert {r["part"] for r in placed} == {f"deliveries_{month_of(uuid.UUID(boundary))}"}
    fk = await db.fetchone("SELECT convalidated, confrelid::regclass::text AS target FROM pg_constraint"
                           " WHERE conname = 'webhook_deliveries_event_id_fkey'")
    assert fk == {"convalidated": True, "target": "events"}
    # The schema's own triggers moved to the partitioned tables (the old tables have none): the
    # webhook hand-over's on events, the queue counts' on deliveries.
    triggers = await db.fetchall("SELECT tgrelid::regclass::text AS relation, tgname FROM pg_trigger"
                                 " WHERE NOT tgisinternal ORDER BY tgname")
    assert triggers == [{"relation": "deliveries", "tgname": f"queue_count_{kind}"}
                        for kind in ("deletes", "inserts", "truncates", "updates")] + [
        {"relation": "events", "tgname": "webhook_handover_queue"}]
    settings = await db.fetchone("SELECT partitioned, retention_months, premake_months FROM storage_settings")
    assert settings == {"partitioned": True, "retention_months": 13, "premake_months": 3}

    # The scheduler's loop runs the maintenance: with a month more to make ahead, it makes it.
    await db.execute("UPDATE storage_settings SET premake_months = 4")
    loop = next(loop for loop in api.parts.loops if loop.desc == "maintain time partitions")
    loop.start()
    loop.wake()
    fifth = f"emails_{month(4).strftime('%Y_%m')}"
    assert not (await db.fetchone("SELECT to_regclass(%s) IS NOT NULL AS made", (fifth,)))["made"]

    async def made() -> bool:
        return (await db.fetchone("SELECT to_regclass(%s) IS NOT NULL AS made", (fifth,)))["made"]

    await async_until(made, 30, f"{fifth} made by the maintenance loop", interval=0.1)
    await loop.stop()
    await db.execute("UPDATE storage_settings SET premake_months = 3")

    # A second run, as an operator types it, changes nothing.
    second = await threads.deferToThread(command, "--config", config_file(tmp_path, fresh_dsn))
    assert second.returncode == 0 and "partitioned already" in second.stdout, second
    assert await snapshot(db) == after

    # The store on the new layout: accept, list, get, attachments, claim and decide, events to webhooks.
    code, fresh, _ = await api.json("POST", "/emails", key, json=MAIL)
    assert code == 200
    part = await db.fetchone("SELECT tableoid::regclass::text AS part FROM emails WHERE id = %s", (fresh["id"],))
    assert part["part"] == f"emails_{month_of(uuid.UUID(fresh['id']))}"
    code, listed, _ = await api.json("GET", "/emails?limit=100", key)
    assert code == 200 and {e["id"] for e in listed["data"]} == {str(r["id"]) for r in after["emails"]} | {fresh["id"]}
    for email_id in (oldest, boundary, fresh["id"]):
        code, got, _ = await api.json("GET", f"/emails/{email_id}", key)
        assert code == 200 and got["id"] == email_id
        code, attached, _ = await api.json("GET", f"/emails/{email_id}/attachments", key)
        assert code == 200 and [a["filename"] for a in attached["data"]] == ["a.txt"]
    queued = await db.fetchall("SELECT DISTINCT email_id FROM deliveries WHERE status = 'queued'")
    decided = await decide(api, datetime.now(UTC) + timedelta(seconds=1), 100)
    assert {w.email_id for w in decided} == {r["email_id"] for r in queued} and len(queued) == 5
    now = datetime.now(UTC)
    attempts = await db.run("claim webhook deliveries", webhooks.claim, now, now + timedelta(seconds=60),
                            uuid.uuid4(), 100, 100)
    assert len(attempts) == 4 + len(decided) and {a["type"] for a in attempts} == {"email.delivered"}

    # Retention: at 13 months and a day after the month of `older` began, the months before it
    # go, with their deliveries, attachments, events and those events' webhook deliveries.
    doomed = month_of(uuid.UUID(oldest))
    keys = {"emails": "id", "events": "id", "deliveries": "email_id", "attachments": "email_id",
            "webhook_deliveries": "event_id"}
    await db.execute("UPDATE deliveries SET status = 'deferred', held_reason = 'kept', due_at = NULL"
                     " WHERE email_id = %s", (oldest,))  # held past the retention: counted until dropped
    assert (await agree(db, datetime.now(UTC))).get("held")
    present = await snapshot(db)
    kept = {t: [r for r in present[t] if month_of(r[keys[t]]) != doomed] for t in TABLES}
    assert all(len(kept[t]) < len(present[t]) for t in TABLES)  # every table has rows to lose
    at = month(11, 2)  # 13 months after a day into the month of `older`
    done = await partition_maintenance.maintain(db, at)
    assert sorted(r["partition_name"] for r in done if r["action"] == "dropped") == sorted(
        f"{t}_{doomed}" for t in ("emails", "events", "deliveries", "attachments"))
    assert {t: await rows_of(db, t) for t in TABLES} == kept
    assert "held" not in await agree(db, datetime.now(UTC))
    code, _, _ = await api.json("GET", f"/emails/{oldest}", key)
    assert code == 404
    code, got, _ = await api.json("GET", f"/emails/{older}", key)
    assert code == 200
    # Premake: the maintenance month and three after it exist for every table.
    ahead = {r["partition_name"] for r in done if r["action"] == "created"}
    for offset in range(4):
        index = at.year * 12 + at.month - 1 + offset
        for table in ("emails", "events", "deliveries", "attachments"):
            name = f"{table}_{index // 12}_{index % 12 + 1:02d}"
            assert name in ahead
    assert await partition_maintenance.maintain(db, at) == []  # nothing left to do

    # Once checked, the operator drops the old tables; the new ones keep every row.
    present = await snapshot(db)
    dropped = await threads.deferToThread(command, "--config", config_file(tmp_path, fresh_dsn), "--drop-old")
    assert dropped.returncode == 0 and "emails_old: 6 rows" in dropped.stdout, dropped
    old = await db.fetchall("SELECT relname FROM pg_class WHERE relname LIKE '%\\_old' AND relkind = 'r'")
    assert old == [] and await snapshot(db) == present
    print(f"partitioned in {took:.1f} s; {len(done)} maintenance actions")


@pt.ensureDeferred
async def test_without_opting_in_the_layout_stays_plain(api):
    db = api.parts.db
    _, key, _ = await sending_tenant(api)
    code, _, _ = await api.json("POST", "/emails", key, json=MAIL)
    assert code == 200
    assert await partition_maintenance.maintain(db, datetime.now(UTC) + timedelta(days=3650)) == []
    kinds = await db.fetchall("SELECT relname, relkind FROM pg_class WHERE relname = ANY(%s)",
                              (["emails", "events", "deliveries", "attachments", "storage_settings"],))
    assert {r["relname"]: r["relkind"] for r in kinds} == {
        "emails": "r", "events": "r", "deliveries": "r", "attachments": "r"}
    assert "maintain time partitions" in [loop.desc for loop in api.parts.loops]


@pt.ensureDeferred
async def test_the_command_refuses_the_embedded_cluster_and_another_schema_version(db, fresh_dsn, tmp_path):
    embedded = await threads.deferToThread(command, "--config", config_file(tmp_path, ""))
    assert embedded.returncode == 2 and "embedded cluster" in embedded.stderr
    await db.execute("DELETE FROM schema_migrations WHERE version = %s", (partitions.WRITTEN_FOR_SCHEMA,))
    refused = await threads.deferToThread(command, "--config", config_file(tmp_path, fresh_dsn))
    assert refused.returncode == 1 and f"written for {partitions.WRITTEN_FOR_SCHEMA}" in refused.stderr, refused
    kinds = await db.fetchall("SELECT relname FROM pg_class WHERE relname LIKE 'emails%' AND relkind IN ('r', 'p')")
    assert [r["relname"] for r in kinds] == ["emails"]


@pt.ensureDeferred
async def test_a_step_that_never_gets_its_lock_leaves_the_plain_layout(api, fresh_dsn):
    """A transaction that keeps the tables busy past every try: the step gives up and takes its parts away."""
    db = api.parts.db
    _, key, _ = await sending_tenant(api)
    code, sent, _ = await api.json("POST", "/emails", key, json=MAIL)
    before = await snapshot(db)
    schema_triggers = await db.fetchall("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
    reader = psycopg2.connect(fresh_dsn)
    said = []

    def keep_busy(stage: str) -> None:
        if stage == "swapping":
            reader.cursor().execute("SELECT count(*) FROM emails")  # its transaction stays open

    def say(line: str) -> None:
        said.append(line)
        if "trying again (10)" in line:
            reader.rollback()  # the step has given up: its clean-up may have the tables

    try:
        with pytest.raises(partitions.PartitionError, match="stayed busy"):
            await threads.deferToThread(partitions.partition, fresh_dsn, lock_timeout=0.1, say=say,
                                        meanwhile=keep_busy)
    finally:
        reader.close()
    assert sum("trying again" in line for line in said) == 10
    left = await db.fetchall("SELECT relname FROM pg_class WHERE relname LIKE '%\\_p' OR relname LIKE 'mailsvc\\_%'"
                             " OR relname = 'storage_settings'")
    triggers = await db.fetchall("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
    assert left == [] and triggers == schema_triggers
    code, _, _ = await api.json("POST", "/emails", key, json=MAIL)
    assert code == 200 and len((await snapshot(db))["emails"]) == len(before["emails"]) + 1
