"""The delivery queue in PostgreSQL: leases and their fencing, pacing, paused and suspended
tenants, the reputation guard. Mail is accepted through the API (whose worker is not running);
the queue is then driven by hand on a Clock."""

import time
import uuid

import pytest
import pytest_twisted as pt
from twisted.internet.task import Clock

from mailsvc import timefmt
from mailsvc.app import suppressions
from mailsvc.domain import policy
from mailsvc.store import deliveries as store
from mailsvc.store import delivery_sweep
from mailsvc.store.deliveries import Outcome
from tests.helpers.sending import BODY, sending_tenant


async def record(api, clock, outcomes) -> int:
    """Outcomes written as the delivery worker writes them."""
    return await store.record(api.parts.db, clock, outcomes, suppress=suppressions.add_many)


def clock_at(seconds: float) -> Clock:
    clock = Clock()
    clock.advance(seconds)
    return clock


async def queued(api, count: int, **tenant_fields):
    tenant, key, _ = await sending_tenant(api, **tenant_fields)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                   json={"send_rate_per_sec": tenant_fields.get("rate", 1000), "daily_quota": 100000})
    code, _, _ = await api.json("POST", "/emails", key, json={
        **BODY, "to": [f"r{i}@example.net" for i in range(count)]})
    assert code == 200
    return tenant, key


async def claim(api, clock, limit=100, lease=60, token=None):
    return await store.claim(api.parts.db, clock, "node-a", token or uuid.uuid4(), limit, lease)


@pt.ensureDeferred
async def test_a_claim_is_exclusive_until_its_lease_ends(api):
    await queued(api, 3)
    clock = clock_at(time.time() + 1)
    first = await claim(api, clock)
    assert len(first.work) == 3
    assert (await claim(api, clock)).work == []
    clock.advance(61)  # the node that claimed them is presumed dead
    again = await claim(api, clock)
    assert sorted(w.id for w in again.work) == sorted(w.id for w in first.work)
    # The first claim's late outcome is refused; the current one is written.
    late = [Outcome(w.id, w.tenant_id, w.email_id, w.recipient, "delivered", {}, "250 ok", claim=uuid.uuid4())
            for w in first.work]
    assert await record(api, clock, late) == 0


@pt.ensureDeferred
async def test_concurrent_claims_never_share_a_delivery(api):
    await queued(api, 40)
    clock = clock_at(time.time() + 1)
    from twisted.internet import defer
    results = await defer.gatherResults([
        defer.ensureDeferred(claim(api, clock, limit=7)) for _ in range(8)])
    ids = [w.id for r in results for w in r.work]
    assert len(ids) == len(set(ids)) == 40


@pt.ensureDeferred
async def test_a_tenant_is_paced_at_its_send_rate(api):
    tenant, _ = await queued(api, 10)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"send_rate_per_sec": 2})
    start = time.time() + 1
    clock = clock_at(start)
    first = await claim(api, clock)
    assert len(first.work) == 2 and first.next_due is not None and start < first.next_due <= start + 1.5
    assert (await claim(api, clock)).work == []  # the rest waits for its turn, nothing fails
    taken = len(first.work)
    for _ in range(20):
        clock.advance(0.5)
        taken += len((await claim(api, clock)).work)
    assert taken == 10  # 2 a second (with one second's burst): 10 within about 5 seconds
    rows = await api.parts.db.fetchall("SELECT status FROM deliveries")
    assert {r["status"] for r in rows} == {"queued"}


@pt.ensureDeferred
async def test_paused_mail_waits_and_suspended_mail_fails(api):
    tenant, key = await queued(api, 2)
    clock = clock_at(time.time() + 1)
    due = await api.parts.db.fetchall("SELECT due_at FROM deliveries ORDER BY id")
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"status": "paused"})
    paused = await claim(api, clock)
    assert paused.work == [] and paused.next_due is None
    # The claim does not read a paused account's mail: not even pushed back.
    rows = await api.parts.db.fetchall("SELECT status, due_at FROM deliveries ORDER BY id")
    assert [r["status"] for r in rows] == ["queued", "queued"] and [r["due_at"] for r in rows] == [
        r["due_at"] for r in due]
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"status": "active"})
    resumed = await api.parts.db.fetchall("SELECT due_at <= now() AS due FROM deliveries")
    assert [r["due"] for r in resumed] == [True, True]
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"status": "paused"})
    clock.advance(1)
    assert (await claim(api, clock)).work == []

    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"status": "suspended"})
    clock.advance(60)
    assert (await claim(api, clock)).work == []  # nor a suspended one's: the sweep fails it
    # The sweep writes what a failure written one by one writes (the claim wrote one so before).
    first, second = await api.parts.db.fetchall(
        "SELECT id, email_id, tenant_id, recipient FROM deliveries ORDER BY id")
    assert await api.parts.db.run("one failure", store.write_failures, clock, [
        Outcome(first["id"], first["tenant_id"], first["email_id"], first["recipient"], "failed",
                {"reason": "account_suspended"}, "account suspended", attempted=False)]) == 1
    clock.advance(1)
    await api.parts.db.execute("UPDATE emails SET last_event = 'sent'")
    assert await delivery_sweep.fail_suspended(api.parts.db, clock) == 1
    assert await delivery_sweep.fail_suspended(api.parts.db, clock) == 0
    rows = await api.parts.db.fetchall(
        "SELECT status, attempts, due_at, claim, claimed_by, claimed_until, last_response, last_attempt_at,"
        " held_reason, extract(epoch FROM updated_at) AS updated FROM deliveries ORDER BY id")
    assert [float(r.pop("updated")) for r in rows] == pytest.approx([clock.seconds() - 1, clock.seconds()])
    assert rows[0] == rows[1] and rows[0]["status"] == "failed" and rows[0]["last_response"] == "account suspended"
    failed = await api.parts.db.fetchall(
        "SELECT tenant_id, data, extract(epoch FROM created_at) AS at FROM events WHERE type = 'email.failed'"
        " ORDER BY id")
    assert [float(e["at"]) for e in failed] == pytest.approx([clock.seconds() - 1, clock.seconds()])
    for event, row in zip(failed, (first, second), strict=True):
        assert event["tenant_id"] == row["tenant_id"]
        assert event["data"] == {
            "email_id": str(row["email_id"]), "delivery_id": str(row["id"]), "to": [row["recipient"]],
            "recipient": row["recipient"], "reason": "account_suspended",
            "created_at": timefmt.iso(timefmt.from_seconds(float(event["at"])))}
    _, got, _ = await api.json("GET", f"/emails/{first['email_id']}", key)
    assert got["last_event"] == "failed"


@pt.ensureDeferred
async def test_a_held_accounts_mail_is_never_claimed_and_its_new_mail_is_held_by_the_sweep(api):
    tenant, key = await queued(api, 2)
    other, other_key, _ = await sending_tenant(api, "other.example.com")
    code, _, _ = await api.json("POST", "/emails", other_key, json={**BODY, "from": "news@other.example.com"})
    assert code == 200
    code, done, _ = await api.json("POST", "/admin/v1/queue/hold", api.operator_token,
                                   json={"tenant_id": tenant["id"], "reason": "abuse review"})
    assert (code, done["count"]) == (200, 2)
    code, _, _ = await api.json("POST", "/emails", key, json={**BODY, "to": ["late@example.net"]})
    assert code == 200
    clock = clock_at(time.time() + 1)
    (work,) = (await claim(api, clock)).work  # the other account's alone
    assert str(work.tenant_id) == other["id"]
    new = await api.parts.db.fetchall(
        "SELECT held_reason, due_at IS NOT NULL AS due FROM deliveries WHERE recipient = 'late@example.net'")
    assert new == [{"held_reason": None, "due": True}]  # not read by the claim
    assert await delivery_sweep.hold_held_accounts(api.parts.db, clock) == 1
    rows = await api.parts.db.fetchall(
        "SELECT held_reason, due_at, status FROM deliveries WHERE tenant_id = %s", (tenant["id"],))
    assert rows == [{"held_reason": "abuse review", "due_at": None, "status": "queued"}] * 3
    assert await delivery_sweep.hold_held_accounts(api.parts.db, clock) == 0


def rows_read(plan: dict) -> int:
    """Rows the plan's nodes read from ``deliveries`` (an index or a table, kept or filtered out), all loops."""
    read = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
    own = read * plan.get("Actual Loops", 1) if plan.get("Relation Name") == "deliveries" else 0
    return own + sum(rows_read(child) for child in plan.get("Plans", ()))


async def explained(db, statement: str, args: dict) -> dict:
    """The plan of ``statement`` as it ran (in a transaction of its own, as the claim runs)."""
    async def run(txn):
        (row,) = await txn.fetchall("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, args)
        return row["QUERY PLAN"][0]["Plan"]
    return await db.run("explain", run)


@pt.ensureDeferred
async def test_the_claim_reads_no_backlog_of_a_suspended_or_paused_account(api):
    """With 10,000 due deliveries each for a suspended, a paused and a paced account, the claim's
    statements read a few rows: one index probe per account, the shares of the active ones."""
    suspended, _ = await queued(api, 1)
    paused, _, _ = await sending_tenant(api, "paused.example.com")
    paced, _, _ = await sending_tenant(api, "paced.example.com")
    active, active_key, _ = await sending_tenant(api, "active.example.com")
    code, _, _ = await api.json("POST", "/emails", active_key, json={**BODY, "from": "news@active.example.com"})
    assert code == 200
    db = api.parts.db
    await db.execute("UPDATE tenants SET status = 'suspended' WHERE id = %s", (suspended["id"],))
    await db.execute("UPDATE tenants SET status = 'paused' WHERE id = %s", (paused["id"],))
    await db.execute("UPDATE tenants SET send_rate_per_sec = 1 WHERE id = %s", (paced["id"],))
    # The backlogs are older than the active account's mail, as they were when they held it up.
    await db.execute(
        "INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)"
        " SELECT gen_random_uuid(), e.id, t.id, 'r' || g || '@example.net', 'queued',"
        " now() - interval '1 hour' + g * interval '1 millisecond', now(), now() + interval '72 hours'"
        " FROM (SELECT id FROM emails LIMIT 1) e, unnest(%s::uuid[]) t(id), generate_series(1, 10000) g",
        ([suspended["id"], paused["id"], paced["id"]],))
    await db.execute("ANALYZE deliveries")
    at = timefmt.from_seconds(time.time() + 1)
    claimable = list(policy.CLAIMABLE_STATUSES)
    accounts = await explained(db, store.DUE_ACCOUNTS, {"at": at, "limit": 200, "claimable": claimable})
    assert rows_read(accounts) < 400  # 4 accounts: a probe each, 200 index entries of the paced one
    shares = await explained(db, store.TAKE_SHARES, {
        "tenants": [paced["id"], active["id"]], "shares": [2, 1], "at": at, "claimable": claimable})
    assert rows_read(shares) < 20  # the 3 rows it takes (and a look past them)
    found = await db.fetchall(store.DUE_ACCOUNTS, {"at": at, "limit": 200, "claimable": claimable})
    assert {str(r["tenant_id"]) for r in found} == {paced["id"], active["id"]}


def _report(work, status, event):
    return Outcome(work.id, work.tenant_id, work.email_id, work.recipient, status, event, None, claim=None)


BOUNCE = {"type": "hard", "source": "dsn", "code": 550, "enhanced_code": "5.1.1", "message": "no such user"}


@pt.ensureDeferred
async def test_the_reputation_guard_pauses_a_bouncing_tenant(api):
    tenant, key = await queued(api, 2)
    clock = clock_at(time.time() + 1)
    first, second = (await claim(api, clock)).work
    await api.parts.db.execute(
        "INSERT INTO delivery_stats (tenant_id, day, delivered, bounced) VALUES (%s, current_date - 1, 192, 7)",
        (tenant["id"],))
    # A bounce report (no claim) applies even while a node holds the delivery.
    assert await record(api, clock, [_report(first, "bounced", BOUNCE)]) == 1
    code, got, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}", api.operator_token)
    assert got["status"] == "active"  # 8 bounced of 200: 4.0%, not over the limit
    assert await record(api, clock, [_report(second, "bounced", BOUNCE)]) == 1
    code, got, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}", api.operator_token)
    assert got["status"] == "paused" and "bounce rate 4.5%" in got["status_reason"]  # 9 of 201
    clock.advance(1)
    assert (await claim(api, clock)).work == []


@pt.ensureDeferred
async def test_the_reputation_guard_counts_complaints_against_deliveries(api):
    tenant, key = await queued(api, 1)
    clock = clock_at(time.time() + 1)
    token = uuid.uuid4()
    (work,) = (await claim(api, clock, token=token)).work
    delivered = Outcome(work.id, work.tenant_id, work.email_id, work.recipient, "delivered", {}, "250 ok", claim=token)
    assert await record(api, clock, [delivered]) == 1
    await api.parts.db.execute(
        "UPDATE delivery_stats SET delivered = delivered + 999, complained = 1 WHERE tenant_id = %s", (tenant["id"],))
    assert await record(api, clock, [_report(work, "complained", {"source": "fbl"})]) == 1
    code, got, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}", api.operator_token)
    assert got["status"] == "paused" and "complaint rate 0.20%" in got["status_reason"]
    suppressed = await api.parts.db.fetchall("SELECT email, origin, source_id FROM suppressions")
    assert suppressed == [{"email": work.recipient, "origin": "complaint", "source_id": work.email_id}]



@pt.ensureDeferred
async def test_the_retry_window_opens_when_mail_is_queued(api):
    await queued(api, 2)
    rows = await api.parts.db.fetchall(
        "SELECT retry_until - updated_at AS window, status FROM deliveries")
    assert [(r["window"].total_seconds(), r["status"]) for r in rows] == [(72 * 3600, "queued")] * 2
