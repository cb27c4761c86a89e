"""
Broadcasts on the real database: the resource through the official Python SDK and
raw HTTP (shapes, the state table, the 409s), scheduling and its release by the scheduler,
cancel in each state, duplicate, preview, and the fan-out job driven step by step (its chunks
through the one accept path, personalisation, suppressed contacts, the membership fixed at
the start, the quota pause on a time the test controls, the reputation pause, the lease that
fences a chunk). Delivery through the real MTA is tests/system/test_broadcast_delivery.py.
"""

from __future__ import annotations

import email
import email.policy
import secrets
import uuid
from datetime import timedelta

import pytest
import pytest_twisted as pt
import resend
from twisted.internet import reactor

from mailsvc import compose, timefmt
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.domain.delivery import sent_event
from mailsvc.domain.errors import LeaseLost
from mailsvc.store import accounts
from mailsvc.store import broadcasts as rows
from mailsvc.store.database import Database
from tests.conftest import Api
from tests.helpers.broadcasts import FROM, HTML, contacts, create, get, run_fanout
from tests.helpers.sdk import call
from tests.helpers.sending import sending_tenant
from tests.helpers.unsubscribe import deliveries


def parse(raw) -> email.message.EmailMessage:
    return email.message_from_bytes(bytes(raw), policy=email.policy.default)


async def messages(api, broadcast_id: str) -> dict[str, bytes | None]:
    """The broadcast's recipients' messages as the delivery worker builds them (unsigned), by
    recipient; None: suppressed."""
    written = await api.parts.db.fetchall(
        "SELECT email_id FROM broadcast_recipients WHERE broadcast_id = %s AND email_id IS NOT NULL", (broadcast_id,))
    found: dict[str, bytes | None] = {}
    for row in written:
        found.update(await deliveries(api, row["email_id"]))
    return found


@pt.ensureDeferred
async def test_the_resource_with_the_python_sdk(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 3)
    created = await call(api, key, resend.Broadcasts.create, {
        "audience_id": segment_id, "from": FROM, "subject": "Hello", "html": HTML, "name": "First",
        "reply_to": ["help@acme.example.com"], "preview_text": "Our news"})
    assert created["object"] == "broadcast"
    got = await call(api, key, resend.Broadcasts.get, created["id"])
    assert got["status"] == "draft" and got["segment_id"] == got["audience_id"] == segment_id
    assert got["from"] == FROM and got["reply_to"] == ["help@acme.example.com"] and got["preview_text"] == "Our news"
    assert got["topic_id"] is None and got["recipients"] == 0 and got["scheduled_at"] is None
    assert got["stats"] == {"delivered": 0, "bounced": 0, "complained": 0, "suppressed": 0, "failed": 0,
                            "delivery_delayed": 0}
    updated = await call(api, key, resend.Broadcasts.update, {"broadcast_id": created["id"], "subject": "Hi again"})
    assert updated["id"] == created["id"]
    assert (await get(api, key, created["id"]))["subject"] == "Hi again"
    copy = await call(api, key, resend.Broadcasts.duplicate, created["id"])
    listed = await call(api, key, resend.Broadcasts.list)
    assert [b["id"] for b in listed["data"]] == [copy["id"], created["id"]]  # newest first
    assert listed["data"][0]["name"] == "First (copy)" and listed["data"][0]["status"] == "draft"
    sent = await call(api, key, resend.Broadcasts.send, {"broadcast_id": created["id"]})
    assert sent["id"] == created["id"]
    assert (await get(api, key, created["id"]))["status"] == "queued"
    canceled = await call(api, key, resend.Broadcasts.cancel, created["id"])
    assert canceled["id"] == created["id"] and (await get(api, key, created["id"]))["status"] == "canceled"
    removed = await call(api, key, resend.Broadcasts.remove, copy["id"])
    assert (removed["object"], removed["id"], removed["deleted"]) == ("broadcast", copy["id"], True)
    # Canceled before any mail was written: nothing is queued, it can be deleted.
    removed = await call(api, key, resend.Broadcasts.remove, created["id"])
    assert removed["deleted"] is True


@pt.ensureDeferred
async def test_fields_are_checked(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 1)
    base = {"segment_id": segment_id, "from": FROM, "subject": "Hi", "html": "<p>x</p>"}
    for body, field in [
        ({**base, "segment_id": None}, "segment_id"),
        ({**base, "segment_id": "nope"}, "segment_id"),
        ({**base, "segment_id": "0190d3c4-0000-7000-8000-000000000000"}, "segment_id"),
        ({**base, "from": "not an address"}, "from"),
        ({**base, "subject": ""}, "subject"),
        ({**base, "subject": "a\nb"}, "subject"),
        ({**base, "topic_id": "t1"}, "topic_id"),
        ({**base, "scheduled_at": "in 40 days"}, "scheduled_at"),
        ({**base, "send": "yes"}, "send"),
        ({**base, "html": None, "send": True}, "html"),
    ]:
        code, error, _ = await api.json("POST", "/broadcasts", key, json=body)
        assert code == 422 and error["name"] == "validation_error" and error["message"].startswith(field), (body, error)
    code, error, _ = await api.json("POST", "/v1/broadcasts", key, json={**base, "from": None})
    assert code == 422 and error["error"]["field"] == "from"
    code, error, _ = await api.json("GET", "/broadcasts/0190d3c4-0000-7000-8000-000000000000", key)
    assert code == 404 and error["name"] == "not_found"
    code, error, _ = await api.json("GET", "/broadcasts/not-a-uuid", key)
    assert code == 404


@pt.ensureDeferred
async def test_states_and_their_409s(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 2)
    # Create: neither → draft; send → queued; scheduled_at (with or without send) → scheduled.
    draft = await create(api, key, segment_id)
    queued = await create(api, key, segment_id, send=True)
    scheduled = await create(api, key, segment_id, scheduled_at="in 1 hour")
    scheduled2 = await create(api, key, segment_id, send=True, scheduled_at="in 2 hours")
    assert (await get(api, key, draft["id"]))["status"] == "draft"
    assert (await get(api, key, queued["id"]))["status"] == "queued"
    got = await get(api, key, scheduled["id"])
    assert got["status"] == "scheduled" and got["scheduled_at"] is not None
    assert (await get(api, key, scheduled2["id"]))["status"] == "scheduled"

    async def answer(method, path, **kw):
        code, body, _ = await api.json(method, path, key, **kw)
        return code, (body or {}).get("name")

    # PATCH: draft only.
    for b in (queued, scheduled):
        assert await answer("PATCH", f"/broadcasts/{b['id']}", json={"name": "x"}) == (409, "broadcast_not_draft")
    # Send: queued or scheduled → in progress.
    assert await answer("POST", f"/broadcasts/{queued['id']}/send") == (409, "broadcast_in_progress")
    assert await answer("POST", f"/broadcasts/{scheduled['id']}/send") == (409, "broadcast_in_progress")
    # Delete: queued → in progress.
    assert await answer("DELETE", f"/broadcasts/{queued['id']}") == (409, "broadcast_in_progress")
    # Cancel of a draft: not cancelable.
    assert await answer("POST", f"/broadcasts/{draft['id']}/cancel") == (409, "broadcast_not_cancelable")
    # Cancel of a scheduled one: back to draft, and it can be edited and sent again.
    code, body, _ = await api.json("POST", f"/broadcasts/{scheduled['id']}/cancel", key)
    assert code == 200 and body == {"object": "broadcast", "id": scheduled["id"]}
    got = await get(api, key, scheduled["id"])
    assert got["status"] == "draft" and got["scheduled_at"] is None
    # Delete of a scheduled one cancels it (it is gone).
    code, body, _ = await api.json("DELETE", f"/broadcasts/{scheduled2['id']}", key)
    assert code == 200 and body["deleted"] is True
    assert (await api.json("GET", f"/broadcasts/{scheduled2['id']}", key))[0] == 404
    # The send: sending → sent; then every operation but duplicate is refused.
    await run_fanout(api)
    got = await get(api, key, queued["id"])
    assert got["status"] == "sent" and got["sent_at"] is not None and got["recipients"] == 2
    assert got["progress"] == {"done": 2, "total": 2}
    assert await answer("POST", f"/broadcasts/{queued['id']}/send") == (409, "broadcast_not_cancelable")
    assert await answer("POST", f"/broadcasts/{queued['id']}/cancel") == (409, "broadcast_not_cancelable")
    assert await answer("DELETE", f"/broadcasts/{queued['id']}") == (409, "broadcast_not_cancelable")
    assert await answer("PATCH", f"/broadcasts/{queued['id']}", json={"name": "x"}) == (409, "broadcast_not_draft")
    code, copy, _ = await api.json("POST", f"/broadcasts/{queued['id']}/duplicate", key)
    assert code == 200
    got = await get(api, key, copy["id"])
    assert got["status"] == "draft" and got["name"] == "Launch (copy)" and got["html"] == HTML
    # A long name is cut to 70 characters with its suffix.
    long = await create(api, key, segment_id, name="N" * 100)
    _, copy, _ = await api.json("POST", f"/broadcasts/{long['id']}/duplicate", key)
    assert (await get(api, key, copy["id"]))["name"] == ("N" * 100 + " (copy)")[:70]
    # Native surface: writes answer the whole broadcast; delete 204.
    code, native, _ = await api.json("POST", "/v1/broadcasts", key, json={
        "segment_id": segment_id, "from": FROM, "subject": "Hi", "text": "x"})
    assert code == 200 and native["object"] == "broadcast" and native["status"] == "draft"
    response, _ = await api.request("DELETE", f"/v1/broadcasts/{native['id']}", key)
    assert response.code == 204


#: What PATCH, send, cancel and delete answer in each state (docs/decisions.md "Broadcast
#: states"): 200, or the 409's name. Canceled and failed broadcasts have mail still queued here.
STATE_TABLE = {
    "draft": (200, 200, "broadcast_not_cancelable", 200),
    "scheduled": ("broadcast_not_draft", "broadcast_in_progress", 200, 200),
    "queued": ("broadcast_not_draft", "broadcast_in_progress", 200, "broadcast_in_progress"),
    "sending": ("broadcast_not_draft", "broadcast_in_progress", 200, "broadcast_in_progress"),
    "paused": ("broadcast_not_draft", "broadcast_in_progress", 200, "broadcast_in_progress"),
    "sent": ("broadcast_not_draft", "broadcast_not_cancelable", "broadcast_not_cancelable",
             "broadcast_not_cancelable"),
    "canceled": ("broadcast_not_draft", "broadcast_not_cancelable", "broadcast_not_cancelable",
                 "broadcast_in_progress"),
    "failed": ("broadcast_not_draft", "broadcast_not_cancelable", "broadcast_not_cancelable",
               "broadcast_in_progress"),
}
#: The status after an operation that succeeded (None: deleted).
AFTER = {("draft", "send"): "queued", ("draft", "PATCH"): "draft", ("scheduled", "cancel"): "draft",
         ("queued", "cancel"): "canceled", ("sending", "cancel"): "canceled", ("paused", "cancel"): "canceled"}


@pt.ensureDeferred
async def test_every_state_answers_patch_send_cancel_and_delete_as_the_table_says(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 2)
    fanout = Fanout(reactor, api.parts.db, api.parts.submitter, chunk=1)
    now = timefmt.from_seconds(reactor.seconds())

    async def sending(paused: bool = False) -> str:
        """Sending, one of its two recipients written (its mail queued), the other pending."""
        b = await create(api, key, segment_id, send=True)
        started = None
        while started is None or started.id != uuid.UUID(b["id"]):  # others left queued start first
            started = await api.parts.db.run("start", rows.start_next, now)
        assert await fanout.write_chunk(started) == 1
        if paused:
            await rows.wait(api.parts.db, started.id, "daily_quota", now + timedelta(hours=1), now)
        return b["id"]

    async def canceled() -> str:
        broadcast_id = await sending()
        assert (await api.json("POST", f"/broadcasts/{broadcast_id}/cancel", key))[0] == 200
        return broadcast_id

    async def failed() -> str:
        broadcast_id = await sending()
        assert await rows.transition(api.parts.db, None, uuid.UUID(broadcast_id), ("sending",), "failed", now,
                                     failure="account_suspended") is not None
        return broadcast_id

    async def sent() -> str:
        b = await create(api, key, segment_id, send=True)
        await run_fanout(api, fanout)
        return b["id"]

    async def created(**fields) -> str:
        return (await create(api, key, segment_id, **fields))["id"]

    # Built in this order, so that no broadcast left queued is sent by a later one's fan-out.
    makers = {"sent": sent, "sending": sending, "paused": lambda: sending(paused=True), "canceled": canceled,
              "failed": failed, "scheduled": lambda: created(scheduled_at="in 1 hour"),
              "queued": lambda: created(send=True), "draft": created}
    operations = {"PATCH": ("PATCH", "", {"json": {"name": "x"}}), "send": ("POST", "/send", {}),
                  "cancel": ("POST", "/cancel", {}), "delete": ("DELETE", "", {})}
    for state, make in makers.items():
        broadcast_id = None  # one broadcast in ``state`` until an operation changes it
        for (operation, (method, suffix, kw)), expected in zip(operations.items(), STATE_TABLE[state], strict=True):
            broadcast_id = broadcast_id or await make()
            seen = (await get(api, key, broadcast_id))["status"]
            assert seen == ("sending" if state == "paused" else state)
            # Duplicate works in every state.
            code, copy, _ = await api.json("POST", f"/broadcasts/{broadcast_id}/duplicate", key)
            assert code == 200 and (await get(api, key, copy["id"]))["status"] == "draft"
            code, body, _ = await api.json(method, f"/broadcasts/{broadcast_id}{suffix}", key, **kw)
            answer = 200 if code == 200 else (code, body["name"])
            assert answer == (expected if expected == 200 else (409, expected)), (state, operation, body)
            if code == 200 and operation == "delete":
                assert (await api.json("GET", f"/broadcasts/{broadcast_id}", key))[0] == 404
                broadcast_id = None
            elif code == 200:
                assert (await get(api, key, broadcast_id))["status"] == AFTER[state, operation], (state, operation)
                broadcast_id = broadcast_id if AFTER[state, operation] == state else None

    # Canceled or failed: deleted once none of its mail is still queued (a deferral is queued).
    for make in (canceled, failed):
        broadcast_id = await make()
        for status, answer in (("deferred", (409, "broadcast_in_progress")), ("delivered", 200)):
            await api.parts.db.execute(
                "UPDATE deliveries d SET status = %s FROM broadcast_recipients r"
                " WHERE r.broadcast_id = %s AND d.email_id = r.email_id", (status, broadcast_id))
            code, body, _ = await api.json("DELETE", f"/broadcasts/{broadcast_id}", key)
            assert (code if code == 200 else (code, body["name"])) == answer
        assert (await api.json("GET", f"/broadcasts/{broadcast_id}", key))[0] == 404


@pt.ensureDeferred
async def test_cancel_while_sending_stops_what_is_not_written(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 30)
    fanout = Fanout(reactor, api.parts.db, api.parts.submitter, chunk=10)
    b = await create(api, key, segment_id, send=True)
    # One chunk only: start, then write one chunk.
    await api.parts.db.run("start", rows.start_next, timefmt.from_seconds(reactor.seconds()))
    row = rows.BroadcastRow.of((await api.parts.db.fetchall("SELECT * FROM broadcasts WHERE id = %s", (b["id"],)))[0])
    assert await fanout.write_chunk(row) == 10
    got = await get(api, key, b["id"])
    assert got["status"] == "sending" and got["recipients"] == 10 and got["progress"] == {"done": 10, "total": 30}
    code, _, _ = await api.json("POST", f"/broadcasts/{b['id']}/cancel", key)
    assert code == 200
    assert await run_fanout(api, fanout) == 0
    got = await get(api, key, b["id"])
    assert got["status"] == "canceled" and got["recipients"] == 10
    assert len(await messages(api, b["id"])) == 10


@pt.ensureDeferred
async def test_each_recipient_gets_a_personalised_message_with_its_own_link(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 4)
    # A contact whose name needs escaping; one that is unsubscribed (suppressed).
    await api.json("PATCH", "/contacts/c1@example.net", key, json={"first_name": "<Bob & Co>"})
    await api.json("PATCH", "/contacts/c3@example.net", key, json={"unsubscribed": True})
    b = await create(api, key, segment_id, send=True, preview_text="Big {{{FIRST_NAME}}} news")
    assert await run_fanout(api) == 4
    got = await get(api, key, b["id"])
    # Sent to three: the unsubscribed contact got nothing.
    assert got["status"] == "sent" and got["recipients"] == 3
    assert got["stats"]["suppressed"] == 1
    stored = await messages(api, b["id"])
    assert set(stored) == {f"c{i}@example.net" for i in range(4)} and stored["c3@example.net"] is None
    links = set()
    for i in range(3):
        message = parse(stored[f"c{i}@example.net"])
        name = "&lt;Bob &amp; Co&gt;" if i == 1 else f"F{i}"
        html = message.get_body(("html",)).get_content()
        text = message.get_body(("plain",)).get_content()
        assert f"Hi {name} L{i}, plan {'pro' if i % 2 else 'free'}" in html
        assert "display:none" in html and (f"Big {name if i != 1 else '&lt;Bob &amp; Co&gt;'} news") in html
        assert html.index("display:none") < html.index("Hi ")  # the preheader comes first
        assert f"<c{i}@example.net>" in text and ("Hi <Bob & Co>" if i == 1 else f"Hi F{i}") in text
        assert message["Subject"] == ("News for <Bob & Co>" if i == 1 else f"News for F{i}")
        (link,) = message.get_all("List-Unsubscribe")
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert link[1:-1] in html.replace("&amp;", "&") and link[1:-1] in text
        links.add(link)
    assert len(links) == 3
    events = await api.parts.db.fetchall("SELECT type, data FROM events WHERE type = 'email.suppressed'")
    assert [e["data"]["recipient"] for e in events] == ["c3@example.net"]
    usage = await api.parts.db.fetchall("SELECT period, count FROM usage")
    assert {r["count"] for r in usage} == {3}  # the suppressed one is not charged


@pt.ensureDeferred
async def test_a_recipient_is_a_row_and_its_message_is_built_from_its_snapshot(api):
    """
    A fanned-out recipient stores no message and no body: its e-mail names the broadcast and its
    recipient row keeps the contact fields the content uses, as they were at fan-out. What is
    delivered and what GET /emails/{id} shows are built from them, whatever the contact became.
    """
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 2)
    b = await create(api, key, segment_id, send=True, preview_text="Big {{{FIRST_NAME}}} news")
    assert await run_fanout(api) == 2
    written = await api.parts.db.fetchall(
        "SELECT r.snapshot, e.id, e.subject, e.html, e.text, e.message, e.broadcast_id, d.recipient,"
        " d.message AS own FROM broadcast_recipients r JOIN emails e ON e.id = r.email_id"
        " JOIN deliveries d ON d.email_id = e.id WHERE r.broadcast_id = %s ORDER BY d.recipient", (b["id"],))
    assert [(r["html"], r["text"], r["message"], r["own"], str(r["broadcast_id"])) for r in written] == [
        (None, None, None, None, b["id"])] * 2
    # Nor does it repeat the broadcast: its tag and where its links point are derived from it.
    kept = await api.parts.db.fetchall(
        "SELECT e.id, e.tags, e.links_base, e.sender, e.created_at, e.subject, d.recipient FROM emails e"
        " JOIN deliveries d ON d.email_id = e.id WHERE e.broadcast_id = %s ORDER BY e.id", (b["id"],))
    assert [(r["tags"], r["links_base"]) for r in kept] == [([], None)] * 2
    links_base = (await api.parts.db.fetchone("SELECT links_base FROM broadcasts WHERE id = %s", (b["id"],)))[
        "links_base"]
    # Each e-mail's email.sent is what the use case composes, with the broadcast's tag.
    tag = [{"name": "broadcast_id", "value": b["id"]}]
    sent = await api.parts.db.fetchall("SELECT data FROM events WHERE type = 'email.sent' ORDER BY id")
    assert [e["data"] for e in sent] == [
        sent_event(r["id"], r["sender"], r["subject"], tag, None, [r["recipient"]], r["created_at"]) for r in kept]
    assert [(r["subject"], r["snapshot"]) for r in written] == [
        ("News for F0", {"email": "c0@example.net", "first_name": "F0", "last_name": "L0"}),
        ("News for F1", {"email": "c1@example.net", "first_name": "F1", "last_name": "L1",
                         "properties": {"plan": "pro"}})]
    before = await messages(api, b["id"])
    # The contact changes (and even leaves) after the fan-out: the message is the snapshot's.
    await api.json("PATCH", "/contacts/c0@example.net", key, json={"first_name": "Changed", "last_name": "Too"})
    await api.json("DELETE", "/contacts/c1@example.net", key)
    delivered = await messages(api, b["id"])
    assert delivered == before  # byte for byte: the same Message-ID, Date and boundaries
    for row in written:
        message = parse(delivered[row["recipient"]])
        html = message.get_body(("html",)).get_content()
        assert f"Hi {'F0 L0, plan free' if row['recipient'] == 'c0@example.net' else 'F1 L1, plan pro'}" in html
        code, got, _ = await api.json("GET", f"/emails/{row['id']}", key)
        assert code == 200, got
        assert got["tags"] == tag
        assert message.get_all("List-Unsubscribe")[0].startswith(f"<{links_base}/") and links_base
        # As delivered, the unsubscribe link left as its placeholder (each recipient's own).
        (link,) = message.get_all("List-Unsubscribe")
        assert got["subject"] == message["Subject"] == row["subject"]
        assert got["html"].replace("{{{RESEND_UNSUBSCRIBE_URL}}}", link[1:-1].replace("&", "&amp;")) == html.rstrip()
        text = message.get_body(("plain",)).get_content().replace("\r\n", "\n")
        assert got["text"].replace("{{{SVC_UNSUBSCRIBE_URL}}}", link[1:-1]) == text
    # Its content is kept while its mail is queued: a sent broadcast is never deleted.
    code, body, _ = await api.json("DELETE", f"/broadcasts/{b['id']}", key)
    assert (code, body["name"]) == (409, "broadcast_not_cancelable")


@pt.ensureDeferred
async def test_the_membership_is_fixed_when_the_send_starts(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 5)
    b = await create(api, key, segment_id, send=True)
    fanout = Fanout(reactor, api.parts.db, api.parts.submitter, chunk=2)
    await api.parts.db.run("start", rows.start_next, timefmt.from_seconds(reactor.seconds()))
    # Added after the start: not a recipient. Deleted after the start: skipped.
    code, _, _ = await api.json("POST", "/contacts", key, json={"email": "late@example.net",
                                                                "segments": [segment_id]})
    assert code == 201
    code, _, _ = await api.json("DELETE", "/contacts/c4@example.net", key)
    assert code == 200
    await run_fanout(api, fanout)
    got = await get(api, key, b["id"])
    assert got["status"] == "sent" and got["recipients"] == 4 and got["progress"] == {"done": 5, "total": 5}
    assert set(await messages(api, b["id"])) == {f"c{i}@example.net" for i in range(4)}


@pt.ensureDeferred
async def test_a_segment_whose_copy_outlasts_the_statement_timeout_still_starts(api, fresh_dsn):
    """A node whose statements are cut at 100 ms starts a broadcast whose membership copy takes
    300 ms (a trigger sleeps in it; a million members outlast the default 15 s on a busy node):
    the start has no deadline, and its total is what it copied."""
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 3)
    await api.parts.db.execute(
        "CREATE FUNCTION slow_copy() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;"
        " CREATE TRIGGER slow_copy BEFORE INSERT ON broadcast_recipients FOR EACH STATEMENT"
        " EXECUTE FUNCTION slow_copy()")
    b = await create(api, key, segment_id, send=True)
    hurried = Database(reactor, fresh_dsn, 1, statement_timeout=0.1)
    await hurried.start()
    try:
        started = await hurried.run("start", rows.start_next, timefmt.from_seconds(reactor.seconds()))
    finally:
        hurried.stop()
    assert started is not None and str(started.id) == b["id"]
    assert (started.status, started.total) == ("sending", 3)
    copied = await api.parts.db.fetchrow("SELECT count(*) AS n FROM broadcast_recipients WHERE broadcast_id = %s",
                                         (started.id,))
    assert copied["n"] == 3


@pt.ensureDeferred
async def test_a_broadcast_whose_segment_is_gone_fails(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 1)
    b = await create(api, key, segment_id, send=True)
    await api.json("DELETE", f"/segments/{segment_id}", key)
    await run_fanout(api)
    got = await get(api, key, b["id"])
    assert got["status"] == "failed" and got["failure"] == "segment_deleted" and got["segment_id"] is None


@pt.ensureDeferred
async def test_a_broadcast_from_an_unverified_domain_is_refused_at_send_as_an_email_is(api):
    """The same 403 an e-mail gets, when asked to send, not 200 and a later "failed"."""
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 1)
    unverified = {"segment_id": segment_id, "from": "News <news@unverified.example.org>", "subject": "s",
                  "html": HTML, "name": "Elsewhere"}
    for extra in ({"send": True}, {"scheduled_at": "in 1 hour"}):
        code, body, _ = await api.json("POST", "/broadcasts", key, json={**unverified, **extra})
        assert (code, body["name"]) == (403, "validation_error") and "not verified" in body["message"], body
        code, body, _ = await api.json("POST", "/v1/broadcasts", key, json={**unverified, **extra})
        assert (code, body["error"]["code"]) == (403, "domain_not_verified"), body
    draft = await create(api, key, segment_id, **{"from": unverified["from"]})
    code, body, _ = await api.json("POST", f"/broadcasts/{draft['id']}/send", key, json={})
    assert (code, body["name"]) == (403, "validation_error"), body
    assert (await get(api, key, draft["id"]))["status"] == "draft"
    code, _, _ = await api.json("POST", f"/broadcasts/{draft['id']}/send", key, json={})
    assert code == 403
    # From the account's verified domain, the same draft goes.
    code, _, _ = await api.json("PATCH", f"/broadcasts/{draft['id']}", key, json={"from": FROM})
    code, sent, _ = await api.json("POST", f"/broadcasts/{draft['id']}/send", key, json={})
    assert code == 200, sent


@pt.ensureDeferred
async def test_scheduled_broadcasts_are_released_by_the_scheduler(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 2)
    b = await create(api, key, segment_id)
    code, sent, _ = await api.json("POST", f"/broadcasts/{b['id']}/send", key,
                                   json={"scheduled_at": "in 1 minute"})
    assert code == 200 and sent == {"id": b["id"]}
    assert (await get(api, key, b["id"]))["status"] == "scheduled"
    assert await api.parts.broadcasts.release_due() == 0
    await api.parts.db.execute("UPDATE broadcasts SET scheduled_at = now() - interval '1 second' WHERE id = %s",
                               (b["id"],))
    assert await api.parts.broadcasts.release_due() == 1
    assert (await get(api, key, b["id"]))["status"] == "queued"
    await run_fanout(api)
    assert (await get(api, key, b["id"]))["status"] == "sent"


@pt.ensureDeferred
async def test_preview_renders_for_a_contact(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 2)
    b = await create(api, key, segment_id)
    code, contact, _ = await api.json("GET", "/contacts/c0@example.net", key)
    code, shown, _ = await api.json("POST", f"/broadcasts/{b['id']}/preview", key, json={"contact_id": contact["id"]})
    assert code == 200, shown
    assert shown["subject"] == "News for F0" and "Hi F0 L0, plan free" in shown["html"]
    assert shown["text"].startswith("Hi F0 <c0@example.net>")
    assert "{{{RESEND_UNSUBSCRIBE_URL}}}" in shown["html"]
    code, shown, _ = await api.json("POST", f"/broadcasts/{b['id']}/preview", key)
    assert code == 200 and shown["subject"] == "News for F1"  # a member of the segment
    code, error, _ = await api.json("POST", f"/broadcasts/{b['id']}/preview", key, json={"contact_id": "x"})
    assert code == 422 and error["message"].startswith("contact_id")


class Shifted:
    """The reactor with its clock moved on by ``offset`` seconds (a time the test controls)."""

    def __init__(self):
        self.offset = 0.0

    def seconds(self) -> float:
        return reactor.seconds() + self.offset

    def __getattr__(self, name):
        return getattr(reactor, name)


@pt.ensureDeferred
async def test_a_used_up_quota_pauses_until_the_next_utc_day(db, config):
    clock = Shifted()
    operator_token = "op_" + secrets.token_urlsafe(16)
    parts = compose.assemble(clock, config, db, secrets.token_bytes(32), operator_token)
    port = reactor.listenTCP(0, parts.site, interface="127.0.0.1")
    api = Api(parts, port, operator_token)
    try:
        tenant, key, _ = await sending_tenant(api)
        code, _, _ = await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", operator_token,
                                    json={"daily_quota": 30})
        assert code == 200
        segment_id = await contacts(api, key, 50)
        # 10 sent today already: 20 remain.
        await api.json("POST", "/emails", key, json={"from": FROM, "to": [f"x{i}@example.org" for i in range(10)],
                                                    "subject": "x", "text": "x"})
        fanout = Fanout(clock, db, parts.submitter, chunk=8)
        b = await create(api, key, segment_id, send=True)
        assert await run_fanout(api, fanout) == 20
        got = await get(api, key, b["id"])
        now = timefmt.from_seconds(clock.seconds())
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        assert got["status"] == "sending" and got["recipients"] == 20
        assert got["wait_reason"] == "daily_quota" and got["wait_until"] == timefmt.resource(midnight)
        assert await run_fanout(api, fanout) == 0  # still today: nothing
        # The next UTC day: 30 more may go; the broadcast resumes by itself.
        clock.offset += (midnight - now).total_seconds() + 1
        assert await run_fanout(api, fanout) == 30
        got = await get(api, key, b["id"])
        assert got["status"] == "sent" and got["recipients"] == 50 and got["wait_reason"] is None
    finally:
        await api.pool.closeCachedConnections()
        await port.stopListening()


@pt.ensureDeferred
async def test_a_paused_account_waits_and_a_suspended_one_fails(api):
    tenant, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 3)
    b = await create(api, key, segment_id, send=True)
    await api.parts.db.execute("UPDATE tenants SET status = 'paused' WHERE id = %s", (tenant["id"],))
    await api.parts.keyring.flush_last_used()
    await run_fanout(api)
    got = await get(api, key, b["id"])
    assert got["status"] == "sending" and got["wait_reason"] == "account_paused" and got["recipients"] == 0
    await api.parts.db.execute("UPDATE tenants SET status = 'active' WHERE id = %s", (tenant["id"],))
    await api.parts.db.execute("UPDATE broadcasts SET wait_until = now() WHERE id = %s", (b["id"],))
    await run_fanout(api)
    got = await get(api, key, b["id"])
    assert got["status"] == "sent" and got["recipients"] == 3 and got["wait_reason"] is None
    b2 = await create(api, key, segment_id, send=True)
    await api.parts.db.execute("UPDATE tenants SET status = 'suspended' WHERE id = %s", (tenant["id"],))
    await run_fanout(api)
    await api.parts.db.execute("UPDATE tenants SET status = 'active' WHERE id = %s", (tenant["id"],))
    got = await get(api, key, b2["id"])
    assert got["status"] == "failed" and got["failure"] == "account_suspended"


@pt.ensureDeferred
async def test_a_chunk_whose_lease_was_taken_over_writes_nothing(api):
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 6)
    b = await create(api, key, segment_id, send=True)
    now = timefmt.from_seconds(reactor.seconds())
    await api.parts.db.run("start", rows.start_next, now)
    # A node claims the chunk, then stalls past its lease; another node takes it over and writes it.
    stalled = uuid.uuid4()
    claimed = await api.parts.db.run("claim", rows.claim, uuid.UUID(b["id"]), stalled, now, 0.001, 6)
    assert len(claimed) == 6
    row = rows.BroadcastRow.of((await api.parts.db.fetchall("SELECT * FROM broadcasts WHERE id = %s", (b["id"],)))[0])
    assert await api.parts.fanout.write_chunk(row) == 6
    # The stalled node wakes up and tries to write its chunk: refused whole.
    tenant = await accounts.get_tenant(api.parts.db, row.tenant_id)
    with pytest.raises(LeaseLost):
        await api.parts.fanout.submit_chunk(row, tenant, stalled, claimed)
    assert len(await messages(api, b["id"])) == 6
    assert (await api.parts.db.fetchone("SELECT count(*) AS n FROM emails"))["n"] == 6


@pt.ensureDeferred
async def test_unset_strings_read_as_empty_strings(api):
    """reply_to is typed string[] and preview_text, html, text string: never null."""
    _, key, _ = await sending_tenant(api)
    segment_id = await contacts(api, key, 1)
    code, created, _ = await api.json("POST", "/broadcasts", key, json={
        "segment_id": segment_id, "from": FROM, "subject": "Hi", "html": HTML})
    assert code == 200, created
    for path in (f"/broadcasts/{created['id']}", f"/v1/broadcasts/{created['id']}"):
        code, got, _ = await api.json("GET", path, key)
        assert code == 200 and (got["reply_to"], got["preview_text"], got["text"]) == ([], "", "")
