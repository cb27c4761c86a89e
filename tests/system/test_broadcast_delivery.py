"""
A broadcast to a 500-contact segment, created and sent with the official Python SDK, fanned out
by the broadcasts role through the one accept path and delivered by the real MTA to the test
sink. Every message is personalised for its contact, carries its own RFC 8058 one-click link
(both headers under every DKIM signature, which dkimpy verifies through the loopback DNS
server), and one link, POSTed exactly as RFC 8058 §3.2 prescribes, unsubscribes its contact.
Also the Node SDK (pinned resend) driving the resource end to end.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections import Counter

import pytest
import pytest_twisted as pt
import resend
import treq
from twisted.internet import defer

from tests.helpers.broadcasts import contacts, run_fanout
from tests.helpers.mta import DOMAIN
from tests.helpers.node_sdk import run_node
from tests.helpers.sdk import call
from tests.helpers.signing import signing_sender, verdicts

CONTACTS = 500
HTML = ('<html><body><p>Dear {{{contact.first_name|friend}}} {{{LAST_NAME}}} ({{{EMAIL}}}),</p>'
        '<p>your plan: {{{contact.plan|free}}}</p>'
        '<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p></body></html>')


@pytest.mark.slow  # about 12 s on two shared cores
@pt.ensureDeferred
async def test_a_broadcast_to_500_contacts_is_delivered_personalised_signed_and_unsubscribable(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    segment_id = await contacts(mta, key, CONTACTS)
    created = await call(mta, key, resend.Broadcasts.create, {
        "segment_id": segment_id, "from": f"Acme News <news@{DOMAIN}>", "subject": "News for {{{FIRST_NAME|you}}}",
        "html": HTML, "preview_text": "This month at Acme", "name": "Monthly"})
    await call(mta, key, resend.Broadcasts.send, {"broadcast_id": created["id"]})
    assert await run_fanout(mta) == CONTACTS

    await mta.sink.wait_for(CONTACTS, timeout=120)
    await mta.settled()
    assert len(mta.sink.messages) == CONTACTS
    links: dict[str, str] = {}
    for received in mta.sink.messages:
        (address,) = received.rcpt_to
        i = int(re.match(r"c(\d+)@example\.net", address).group(1))
        parsed = email.message_from_bytes(received.data, policy=email.policy.default)
        assert parsed["To"] == address and parsed["Subject"] == f"News for F{i}"
        html = parsed.get_body(("html",)).get_content()
        assert f"Dear F{i} L{i} ({address})," in html and f"your plan: {'pro' if i % 2 else 'free'}" in html
        assert "This month at Acme" in html
        assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        (value,) = parsed.get_all("List-Unsubscribe")
        link = value[1:-1]
        assert f'href="{link}"' in html
        links[address] = link
    assert len(set(links.values())) == CONTACTS  # each its own
    # dkimpy: every signature of every message, List-Unsubscribe* covered.
    for received in mta.sink.messages:
        assert await verdicts(mta, received.data) == [True, True]
        assert b"list-unsubscribe:list-unsubscribe-post" in received.data.lower().replace(b" ", b"").replace(
            b"\r\n\t", b"")

    got = await call(mta, key, resend.Broadcasts.get, created["id"])
    assert got["status"] == "sent" and got["recipients"] == CONTACTS
    assert got["stats"]["delivered"] == CONTACTS

    # RFC 8058 §3.2: a POST to the link with the one-click body.
    response = await treq.post(links["c7@example.net"], data=b"List-Unsubscribe=One-Click",
                               headers={"Content-Type": "application/x-www-form-urlencoded"}, pool=mta.pool)
    assert response.code == 200, await response.text()
    code, contact, _ = await mta.json("GET", "/contacts/c7@example.net", key)
    assert code == 200 and contact["unsubscribed"] is True
    code, contact, _ = await mta.json("GET", "/contacts/c8@example.net", key)
    assert contact["unsubscribed"] is False


@pytest.mark.slow  # node processes
@pt.ensureDeferred
async def test_the_node_sdk_drives_broadcasts(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    segment_id = await contacts(mta, key, 3)
    body = {"segmentId": segment_id, "from": f"Acme <news@{DOMAIN}>", "subject": "Hi {{{FIRST_NAME}}}",
            "html": "<p>Hi {{{FIRST_NAME}}}</p>", "name": "Node", "previewText": "preview"}
    (created,) = await run_node(mta, key, [{"op": "broadcasts.create", "args": [body]}])
    assert created["error"] is None, created
    broadcast_id = created["data"]["id"]
    results = await run_node(mta, key, [
        {"op": "broadcasts.get", "args": [broadcast_id]},
        {"op": "broadcasts.update", "args": [broadcast_id, {"subject": "Hello {{{FIRST_NAME}}}"}]},
        {"op": "broadcasts.list", "args": []},
        {"op": "broadcasts.duplicate", "args": [broadcast_id]},
        {"op": "broadcasts.send", "args": [broadcast_id]},
        {"op": "broadcasts.update", "args": [broadcast_id, {"subject": "late"}]},
        {"op": "broadcasts.send", "args": [broadcast_id]},
        {"op": "broadcasts.remove", "args": [broadcast_id]},
    ])
    got, updated, listed, copy, sent, late, again, removed = results
    assert got["data"]["status"] == "draft" and got["data"]["preview_text"] == "preview"
    assert updated["error"] is None and listed["data"]["data"][0]["id"] == broadcast_id
    assert sent["error"] is None and sent["data"]["id"] == broadcast_id
    assert late["error"]["name"] == "broadcast_not_draft" and late["error"]["statusCode"] == 409
    assert again["error"]["name"] == "broadcast_in_progress"
    assert removed["error"]["name"] == "broadcast_in_progress"
    (canceled,) = await run_node(mta, key, [{"op": "broadcasts.cancel", "args": [copy["data"]["id"]]}])
    assert canceled["error"]["name"] == "broadcast_not_cancelable"
    await run_fanout(mta)
    await mta.sink.wait_for(3, timeout=60)
    subjects = sorted(email.message_from_bytes(m.data, policy=email.policy.default)["Subject"]
                      for m in mta.sink.messages)
    assert subjects == ["Hello F0", "Hello F1", "Hello F2"]


@pytest.mark.slow  # two nodes, 2,000 recipients delivered
@pt.ensureDeferred
async def test_two_broadcast_nodes_split_the_work_with_no_duplicate(start_mta_with):
    first = await start_mta_with(MAILSVC_BROADCASTS_CHUNK="50")
    second = await start_mta_with(MAILSVC_BROADCASTS_CHUNK="50")
    first.route("example.net")
    tenant, key, _ = await signing_sender(first)
    code, _, _ = await first.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", first.operator_token,
                                  json={"daily_quota": 10_000})
    assert code == 200
    segment_id = await contacts(first, key, 2000)
    code, created, _ = await first.json("POST", "/broadcasts", key, json={
        "segment_id": segment_id, "from": f"Acme <news@{DOMAIN}>", "subject": "For {{{FIRST_NAME}}}",
        "html": "<p>Hi {{{FIRST_NAME}}}</p>", "send": True})
    assert code == 200, created
    written = {"first": 0, "second": 0}

    async def node(name, mta):
        for _ in range(1000):
            n = await mta.parts.fanout.step()
            written[name] += n
            got = await mta.parts.db.fetchone("SELECT status FROM broadcasts WHERE id = %s", (created["id"],))
            if got["status"] == "sent":
                return
        raise AssertionError("not sent")

    await defer.gatherResults([defer.ensureDeferred(node("first", first)),
                               defer.ensureDeferred(node("second", second))], consumeErrors=True)
    assert written["first"] > 0 and written["second"] > 0, written
    assert written["first"] + written["second"] == 2000
    rows = await first.parts.db.fetchall("SELECT recipient FROM deliveries")
    assert len(rows) == 2000 and len({r["recipient"] for r in rows}) == 2000
    await first.sink.wait_for(2000, timeout=120)
    await first.settled()
    await second.settled()
    assert Counter(m.rcpt_to[0] for m in first.sink.messages) == Counter(
        {f"c{i}@example.net": 1 for i in range(2000)})
