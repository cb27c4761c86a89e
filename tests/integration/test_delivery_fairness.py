"""A fair delivery claim, end to end with the delivery worker running: one account's backlog
(suspended, paused, or paced) never holds up another account's mail, and a suspended account's
queue fails in bulk, written as every failure is. The backlogs are made in SQL (copies of an
e-mail's delivery to test addresses), as bench/delivery.py makes its queue."""

import time

import pytest
import pytest_twisted as pt

from tests.helpers.polling import async_until
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

TEST_FROM = "Acme <onboarding@resend.dev>"
BACKLOG = 10_000


async def _account(mta) -> tuple[dict, str]:
    """An account without a domain (it sends as the test sender), paced at 1,000/s."""
    tenant, key = await mta.api.tenant()
    code, tenant, _ = await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token,
                                     json={"send_rate_per_sec": 1000, "daily_quota": 100000})
    assert code == 200, tenant
    return tenant, key


async def _send(mta, key: str, to: str) -> str:
    code, sent, _ = await mta.json("POST", "/emails", key, json={
        "from": TEST_FROM, "to": [to], "subject": "Trying", "html": "<p>Hi</p>"})
    assert code == 200, sent
    return sent["id"]


async def _status(mta, email_id: str) -> str:
    (row,) = await mta.deliveries(email_id)
    return row["status"]


async def _delivered(mta, key: str, name: str) -> str:
    """An e-mail delivered to one test address; its id."""
    email_id = await _send(mta, key, f"delivered+{name}@resend.dev")
    await async_until(lambda: _is(mta, email_id, "delivered"), 10, f"{name}'s first e-mail delivered")
    return email_id


async def _backlog(mta, email_id: str, name: str, count: int = BACKLOG) -> None:
    """``count`` more deliveries of the e-mail queued, due a minute ago (older than anything sent after)."""
    await mta.parts.db.execute(
        "INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)"
        " SELECT gen_random_uuid(), d.email_id, d.tenant_id, 'delivered+' || %s || g || '@resend.dev', 'queued',"
        " now() - interval '1 minute' + g * interval '1 microsecond', now(), now() + interval '72 hours'"
        " FROM deliveries d, generate_series(1, %s) g WHERE d.email_id = %s",
        (name, count, email_id))
    await mta.parts.db.execute("ANALYZE deliveries")


async def _is(mta, email_id: str, status: str) -> bool:
    return await _status(mta, email_id) == status


async def _delivered_within(mta, key: str, seconds: float) -> float:
    """An e-mail to a test address, delivered within ``seconds``; how long it took."""
    start = time.monotonic()
    email_id = await _send(mta, key, "delivered@resend.dev")
    await async_until(lambda: _is(mta, email_id, "delivered"), seconds,
                      lambda: _status_told(mta, email_id))
    return time.monotonic() - start


async def _status_told(mta, email_id: str) -> str:
    return f"the other account's e-mail delivered (it is {await _status(mta, email_id)})"


async def _set(mta, tenant: dict, **fields) -> None:
    code, got, _ = await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token, json=fields)
    assert code == 200, got


def _loop(mta, desc: str):
    (loop,) = [loop for loop in mta.parts.loops if loop.desc == desc]
    return loop


@pytest.mark.timeout(120)
@pt.ensureDeferred
async def test_a_suspended_accounts_backlog_fails_in_bulk_and_holds_up_nobody(mta):
    a, a_key = await _account(mta)
    _, b_key = await _account(mta)
    a_email = await _delivered(mta, a_key, "a")
    await _set(mta, a, status="suspended", status_reason="abuse")
    await _backlog(mta, a_email, "a")

    assert await _delivered_within(mta, b_key, 2) < 2

    sweep = _loop(mta, "sweep the delivery queue")
    sweep.start()
    sweep.wake()

    async def all_failed():
        row = await mta.parts.db.fetchone(
            "SELECT count(*) FILTER (WHERE status = 'failed') AS failed,"
            " count(*) FILTER (WHERE status IN ('queued', 'deferred')) AS queued FROM deliveries WHERE email_id = %s",
            (a_email,))
        return row["failed"] == BACKLOG and row["queued"] == 0

    await async_until(all_failed, 60, "the suspended account's queue failed")
    # Written as every failure is: the row (no attempt counted), an email.failed event each
    # (the outbox the webhooks are sent from), the e-mail's last_event.
    rows = await mta.parts.db.fetchall(
        "SELECT DISTINCT attempts, last_response, claim, due_at FROM deliveries"
        " WHERE email_id = %s AND status = 'failed'",
        (a_email,))
    assert rows == [{"attempts": 0, "last_response": "account suspended", "claim": None, "due_at": None}]
    failed = await mta.parts.db.fetchall(
        "SELECT tenant_id, data FROM events WHERE type = 'email.failed' ORDER BY id")
    assert len(failed) == BACKLOG and {str(e["tenant_id"]) for e in failed} == {a["id"]}
    one = failed[0]["data"]
    assert set(one) == {"email_id", "delivery_id", "created_at", "to", "recipient", "reason"}
    assert one["reason"] == "account_suspended" and one["to"] == [one["recipient"]] and one["email_id"] == a_email
    assert len({e["data"]["delivery_id"] for e in failed}) == BACKLOG
    _, got, _ = await mta.json("GET", f"/emails/{a_email}", a_key)
    assert got["last_event"] == "failed"


@pytest.mark.timeout(120)
@pt.ensureDeferred
async def test_a_paused_backlog_and_a_paced_one_hold_up_nobody(mta):
    paused, paused_key = await _account(mta)
    paced, paced_key = await _account(mta)
    _, b_key = await _account(mta)
    paused_email = await _delivered(mta, paused_key, "p")
    paced_email = await _delivered(mta, paced_key, "c")
    await _set(mta, paused, status="paused", status_reason="bounce rate")
    await _set(mta, paced, send_rate_per_sec=1)
    start = time.monotonic()
    await _backlog(mta, paused_email, "p")
    await _backlog(mta, paced_email, "c")
    due_before = await mta.parts.db.fetchone(
        "SELECT max(due_at) AS latest FROM deliveries WHERE email_id = %s", (paused_email,))

    assert await _delivered_within(mta, b_key, 2) < 2

    # The paused account's mail was not read: none of it pushed back, none sent.
    row = await mta.parts.db.fetchone(
        "SELECT max(due_at) AS latest, count(*) FILTER (WHERE status = 'queued') AS queued FROM deliveries"
        " WHERE email_id = %s AND recipient ~ '^delivered[+]p[0-9]'", (paused_email,))
    assert row == {"latest": due_before["latest"], "queued": BACKLOG}
    # The paced one goes on at its pace: one a second, after a second's burst.
    sent = await mta.parts.db.fetchone(
        "SELECT count(*) AS n FROM deliveries WHERE email_id = %s AND status <> 'queued'"
        " AND recipient ~ '^delivered[+]c[0-9]'", (paced_email,))
    assert 1 <= sent["n"] <= 2 + (time.monotonic() - start) + 1
