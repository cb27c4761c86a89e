"""
What an e-mail's page and the e-mails list read beyond the API (``http/dashboard/reads.py``):
an e-mail's particulars (Message-ID, idempotency key, Inbox copy, source), its HTML as a client in
dark mode shows it, and the list narrowed by time made and sending domain.
"""

from __future__ import annotations

import json
import time

import pytest
import pytest_twisted as pt

from mailsvc.config import load
from tests.helpers import knobs
from tests.helpers.dashboard import PASSWORD, Session, cookie_of, link_token
from tests.helpers.sending import BODY, sending_tenant

DARK_HTML = ("<style>body { color: #111 } @media (prefers-color-scheme: dark) { body { color: #eee } }</style>"
             "<p>Hi</p>")


@pytest.fixture
def config(dns_server):
    """Names resolve through the test DNS server (a webhook's endpoint)."""
    dns_server.a("hooks.example.com", "8.8.8.8")
    return dns_server.configure(load(None, environ=knobs.NODE))


async def owner_of_a_sending_account(api):
    tenant, key, domain_id = await sending_tenant(api)
    _, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                json={"email": "owner@example.com"})
    _, body, response = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": PASSWORD})
    return key, Session(api, cookie_of(response)[1], body["csrf_token"], body)


@pt.ensureDeferred
async def test_an_emails_page_reads_its_message_id_key_and_where_its_source_is(api):
    key, session = await owner_of_a_sending_account(api)
    _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "html": DARK_HTML},
                                headers={"Idempotency-Key": "order-42-shipped"})
    _, other, _ = await api.json("POST", "/emails", key, json=BODY)
    code, found, _ = await session.json("GET", f"/dashboard/emails/{sent['id']}/particulars")
    assert code == 200, found
    (message_id,) = await api.parts.db.fetchall("SELECT message_id FROM emails WHERE id = %s", (sent["id"],))
    assert found["message_id"] == message_id["message_id"]
    assert found["idempotency_key"] == "order-42-shipped"
    # Not to a test address, not over SMTP: built and signed at each delivery, kept nowhere.
    assert (found["inbox_id"], found["source"], found["source_signed"]) == (None, None, False)
    assert (await session.json("GET", f"/dashboard/emails/{other['id']}/particulars"))[1]["idempotency_key"] is None
    code, _, _ = await session.json("GET", "/dashboard/emails/0192f0c4-1a2b-7c3d-8e4f-000000000001/particulars")
    assert code == 404

    cookie = {"Cookie": f"mailsvc_session={session.token}"}
    _, light = await api.request("GET", f"/dashboard/emails/{sent['id']}/html", headers=cookie)
    response, dark = await api.request("GET", f"/dashboard/emails/{sent['id']}/html?scheme=dark", headers=cookie)
    assert light == DARK_HTML.encode()
    assert response.code == 200 and b"prefers-color-scheme" not in dark and b"(min-width: 0px)" in dark
    assert "sandbox" in response.headers.getRawHeaders("content-security-policy")[0]


@pt.ensureDeferred
async def test_the_email_list_narrows_by_time_made_and_sending_domain(api):
    key, session = await owner_of_a_sending_account(api)
    ids = []
    for sender in ("Acme <news@acme.example.com>", "billing@acme.example.com", "news@acme.example.com"):
        _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "from": sender})
        ids.append(sent["id"])
    await api.parts.db.execute("UPDATE emails SET created_at = CASE id::text WHEN %s THEN '2026-11-01T12:00:00Z'"
                               " WHEN %s THEN '2026-11-15T12:00:00Z' ELSE '2026-11-30T23:30:00Z' END::timestamptz",
                               (ids[0], ids[1]))
    await api.parts.db.execute("UPDATE emails SET sender = 'news@other.example.org' WHERE id = %s", (ids[2],))

    async def listed(query):
        code, found, _ = await session.json("GET", f"/dashboard/search/emails?{query}")
        assert code == 200, found
        return sorted(ids.index(e["id"]) for e in found["data"])

    assert await listed("since=2026-11-10T00:00:00Z") == [1, 2]
    assert await listed("until=2026-11-15T12:00:00Z") == [0]  # until is left out
    # A reader east of UTC: their 1 December began at 23:00 UTC on 30 November.
    assert await listed("since=2026-11-30T23:00:00Z&until=2026-12-01T23:00:00Z") == [2]
    assert await listed("domain=acme.example.com") == [0, 1]
    assert await listed("domain=ACME.example.com&since=2026-11-10T00:00:00%2B00:00") == [1]
    assert await listed("domain=example.com") == []  # the whole domain, not a suffix
    for query, name in (("since=yesterday", "since"), ("until=2026-11-01", "until"), ("domain=%3Cb%3E", "domain")):
        code, refused, _ = await session.json("GET", f"/dashboard/search/emails?{query}")
        assert code == 422 and name in refused["message"], (query, refused)


@pt.ensureDeferred
async def test_a_webhooks_deliveries_carry_their_payload_as_sent_and_the_last_24_hours(api):
    key, session = await owner_of_a_sending_account(api)
    code, hook, _ = await session.json("POST", "/dashboard/webhooks", json={
        "endpoint": "https://hooks.example.com/mailsvc", "events": ["email.sent"]})
    assert code in (200, 201), hook
    for _ in range(3):
        await api.json("POST", "/emails", key, json=BODY)
    events = await api.parts.db.fetchall("SELECT id, tenant_id, created_at FROM events ORDER BY id")
    now = time.time()
    outcomes = [("delivered", 200, "ok", 0), ("failed", None, "timeout: no response data for 10 s", 0),
                ("failed", 503, "busy", 2 * 86400)]  # the last one two days ago
    for (state, status, answer, age), event in zip(outcomes, events, strict=True):
        await api.parts.db.execute(
            "INSERT INTO webhook_deliveries (webhook_id, event_id, tenant_id, state, attempts, due_at,"
            " last_attempt_at, last_status, last_response, created_at)"
            " VALUES (%s, %s, %s, %s, 1, now(), to_timestamp(%s), %s, %s, %s)",
            (hook["id"], event["id"], event["tenant_id"], state, now - age, status, answer, event["created_at"]))
    code, listed, _ = await session.json("GET", f"/dashboard/webhooks/{hook['id']}/deliveries")
    assert code == 200, listed
    assert listed["last_24_hours"] == {"delivered": 1, "attempted": 2, "succeeded": 0, "made": 0}  # no attempt kept
    by_event = {d["event_id"]: d for d in listed["data"]}
    first = by_event[str(events[0]["id"])]
    assert json.loads(first["payload"])["type"] == "email.sent"
    assert json.loads(first["payload"])["data"]["email_id"]
    assert by_event[str(events[1]["id"])]["response"] == "timeout: no response data for 10 s"
    # A page at a time, newest event first, as the API's lists (the event's id the cursor).
    code, head, _ = await session.json("GET", f"/dashboard/webhooks/{hook['id']}/deliveries?limit=2")
    assert code == 200 and head["has_more"] is True, head
    assert [d["event_id"] for d in head["data"]] == [str(events[2]["id"]), str(events[1]["id"])]
    code, rest, _ = await session.json("GET", f"/dashboard/webhooks/{hook['id']}/deliveries?limit=2"
                                              f"&after={head['data'][-1]['event_id']}")
    assert code == 200 and rest["has_more"] is False and [d["event_id"] for d in rest["data"]] == [str(events[0]["id"])]
    code, back, _ = await session.json("GET", f"/dashboard/webhooks/{hook['id']}/deliveries?limit=2"
                                              f"&before={events[0]['id']}")
    assert code == 200 and back["has_more"] is False and [d["event_id"] for d in back["data"]] == [
        str(events[2]["id"]), str(events[1]["id"])]
