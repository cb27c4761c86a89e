"""An account's transactional mail goes ahead of its broadcast stream in the claim (docs/decisions.md,
"A fair claim"): each delivery row keeps its e-mail's stream (``bulk``, migration 0030), written at
accept, kept through retries. Mail is accepted through the API and the fan-out (whose workers are
not running); the queue is then claimed by hand on a Clock, as in test_delivery_queue.py."""

import time
import uuid

import pytest_twisted as pt
from twisted.internet import threads
from twisted.internet.task import Clock

from mailsvc import timefmt
from mailsvc.domain import policy
from mailsvc.store import deliveries as store
from mailsvc.store import partitions
from mailsvc.store.deliveries import Outcome
from mailsvc.store.migrate import migration_files
from tests.helpers.broadcasts import contacts, create, run_fanout
from tests.helpers.sending import BODY, sending_tenant
from tests.integration.test_delivery_queue import claim, clock_at, explained, record, rows_read
from tests.integration.test_sending import another_node

BACKLOG = 20_000


async def _account(api, domain: str = "acme.example.com") -> tuple[dict, str]:
    tenant, key, _ = await sending_tenant(api, domain)
    code, got, _ = await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                                  json={"send_rate_per_sec": 1000, "daily_quota": 100000})
    assert code == 200, got
    return tenant, key


async def _broadcast(api, tenant: dict, key: str, backlog: int = 0) -> list[uuid.UUID]:
    """A broadcast to two contacts fanned out, and ``backlog`` copies of its first delivery due an
    hour ago (older than anything sent after); the ids of the two fanned-out deliveries."""
    await create(api, key, await contacts(api, key, 2), send=True)
    assert await run_fanout(api) == 2
    rows = await api.parts.db.fetchall(
        "SELECT d.id FROM deliveries d JOIN emails e ON e.id = d.email_id"
        " WHERE e.broadcast_id IS NOT NULL AND d.tenant_id = %s ORDER BY d.due_at, d.id", (tenant["id"],))
    fanned = [r["id"] for r in rows]
    if backlog:
        await api.parts.db.execute(
            "INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until, bulk)"
            " SELECT gen_random_uuid(), d.email_id, d.tenant_id, 'b' || g || '@example.net', 'queued',"
            " now() - interval '1 hour' + g * interval '1 millisecond', now(), d.retry_until, d.bulk"
            " FROM deliveries d, generate_series(1, %s) g WHERE d.id = %s",
            (backlog, fanned[0]))
        await api.parts.db.execute("ANALYZE deliveries")
    return fanned


async def _send(api, key: str, **fields) -> uuid.UUID:
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, **fields})
    assert code == 200, sent
    return uuid.UUID(sent["id"])


def _explain_args(tenants: list, shares: list) -> dict:
    return {"tenants": tenants, "shares": shares, "at": timefmt.from_seconds(time.time() + 1),
            "claimable": list(policy.CLAIMABLE_STATUSES)}


@pt.ensureDeferred
async def test_each_delivery_keeps_its_emails_stream(api, config):
    """Written at accept (a broadcast's fan-out, or the stream asked on ``POST /emails``) and kept
    when a scheduled e-mail is released."""
    tenant, key = await _account(api)
    fanned = await _broadcast(api, tenant, key)
    transactional = await _send(api, key)
    broadcast_stream = await _send(api, key, stream="broadcast")
    scheduled = {stream: await _send(api, key, stream=stream, scheduled_at="in 1 min")
                 for stream in ("transactional", "broadcast")}
    clock = Clock()
    clock.advance(time.time() + 120)
    assert await another_node(api, clock, config).release_due() == 2
    rows = await api.parts.db.fetchall("SELECT id, email_id, status, bulk FROM deliveries")
    assert {r["id"]: r["bulk"] for r in rows if r["id"] in fanned} == dict.fromkeys(fanned, True)
    assert {r["email_id"]: (r["status"], r["bulk"]) for r in rows if r["id"] not in fanned} == {
        transactional: ("queued", False), broadcast_stream: ("queued", True),
        scheduled["transactional"]: ("queued", False), scheduled["broadcast"]: ("queued", True)}


@pt.ensureDeferred
async def test_transactional_mail_goes_before_the_accounts_broadcast_backlog(api):
    """With 20,000 broadcast deliveries due for an hour, an e-mail accepted after them is the
    account's first claimed; the claim's statements read a few rows of the backlog."""
    tenant, key = await _account(api)
    await _broadcast(api, tenant, key, BACKLOG)
    transactional = await _send(api, key)
    db = api.parts.db

    accounts = await explained(db, store.DUE_ACCOUNTS, {**_explain_args([], []), "limit": 200})
    assert rows_read(accounts) < 210  # a probe for the account, 200 index entries, the broadcast range's first
    (due,) = await db.fetchall(store.DUE_ACCOUNTS, {**_explain_args([], []), "limit": 200})
    assert due["n"] == 200 and due["oldest"] < timefmt.from_seconds(time.time() - 3000)  # the backlog's
    shares = await explained(db, store.TAKE_SHARES, _explain_args([tenant["id"]], [3]))
    assert rows_read(shares) < 10  # the transactional row and two of the backlog (and a look past them)

    clock = clock_at(time.time() + 1)
    (first,) = (await claim(api, clock, limit=1)).work
    assert first.email_id == transactional
    then = (await claim(api, clock, limit=2)).work
    assert [w.recipient for w in then] == ["b1@example.net", "b2@example.net"]  # the oldest due first


@pt.ensureDeferred
async def test_a_retried_broadcast_delivery_stays_in_the_broadcast_stream(api):
    tenant, key = await _account(api)
    fanned = await _broadcast(api, tenant, key)
    clock = clock_at(time.time() + 1)
    token = uuid.uuid4()
    (work,) = (await claim(api, clock, limit=1, token=token)).work
    assert work.id == fanned[0]
    # Deferred, and due again before anything else (an hour ago): still after transactional mail.
    deferred = Outcome(work.id, work.tenant_id, work.email_id, work.recipient, "deferred",
                       {"class": "temporary", "code": 451, "enhanced_code": "4.3.0", "message": "try later",
                        "next_attempt_at": timefmt.iso(timefmt.from_seconds(time.time() - 3600))},
                       "451 4.3.0 try later", claim=token, due_at=time.time() - 3600)
    assert await record(api, clock, [deferred]) == 1
    transactional = await _send(api, key)
    row = await api.parts.db.fetchone("SELECT status, attempts, bulk FROM deliveries WHERE id = %s", (work.id,))
    assert row == {"status": "deferred", "attempts": 1, "bulk": True}
    (first,) = (await claim(api, clock, limit=1)).work
    assert first.email_id == transactional
    assert [w.id for w in (await claim(api, clock, limit=2)).work] == fanned  # the retry, the oldest due, first


@pt.ensureDeferred
async def test_each_account_takes_its_share_its_transactional_mail_first(api):
    """Fair between accounts as before: an account's broadcast backlog holds up no other account's
    mail, and its own share goes to its transactional mail first."""
    tenant, key = await _account(api)
    other, other_key = await _account(api, "other.example.com")
    await _broadcast(api, tenant, key, 1000)
    transactional = await _send(api, key)
    others = await _send(api, other_key, **{"from": "news@other.example.com"})
    clock = clock_at(time.time() + 1)
    work = (await claim(api, clock, limit=2)).work
    assert sorted(w.email_id for w in work) == sorted([transactional, others])
    work = (await claim(api, clock, limit=4)).work
    assert [w.recipient for w in work] == [f"b{i}@example.net" for i in range(1, 5)]
    assert {str(w.tenant_id) for w in work} == {tenant["id"]}


#: Migration 0030 undone: the claim's index and the deliveries' columns as they were before it.
BEFORE_STREAMS = (
    "DROP INDEX deliveries_tenant_stream_due;"
    " CREATE INDEX deliveries_tenant_due ON deliveries (tenant_id, due_at) WHERE status IN ('queued', 'deferred');"
    " ALTER TABLE deliveries DROP COLUMN bulk"
)


@pt.ensureDeferred
async def test_the_stream_migration_applies_to_a_partitioned_deliveries_table(db, fresh_dsn):
    """A database partitioned before migration 0030 takes it: the column and the claim's index on
    the partitioned table and on every partition."""
    assert await threads.deferToThread(partitions.partition, fresh_dsn, say=lambda _: None)
    (sql,) = [text for _, name, text in migration_files() if name == "delivery_stream"]
    await db.execute(BEFORE_STREAMS)
    await db.execute(sql)
    parts = ("WITH parts AS (SELECT 'deliveries'::regclass AS oid"
             " UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = 'deliveries'::regclass) ")
    tables = await db.fetchall(
        parts + "SELECT c.relname, c.relkind, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) AS value"
        " FROM parts JOIN pg_class c ON c.oid = parts.oid"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'bulk'"
        " LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum")
    assert len(tables) > 4 and {r["relkind"] for r in tables} == {"p", "r"}
    assert {(r["attnotnull"], r["value"]) for r in tables} == {(True, "false")}
    indexes = await db.fetchall(
        parts + "SELECT c.relname, regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') AS definition"
        " FROM parts JOIN pg_index i ON i.indrelid = parts.oid JOIN pg_class c ON c.oid = parts.oid"
        " WHERE pg_get_indexdef(i.indexrelid) LIKE '%% USING btree (tenant_id,%%'")
    assert sorted((r["relname"], r["definition"]) for r in indexes) == sorted(
        (r["relname"], "btree (tenant_id, bulk, due_at) WHERE (status = ANY (ARRAY['queued'::text, 'deferred'::text]))")
        for r in tables)
