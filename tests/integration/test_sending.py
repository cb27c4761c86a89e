"""Sending over HTTP: POST /emails, batch, idempotency, the email resource, through the SDK."""

import base64
import email
import email.policy
import json
import uuid

import attrs
import psycopg2
import pytest
import pytest_twisted as pt
import resend
import resend.exceptions
from twisted.internet import defer, reactor, threads

from mailsvc.app import mimebudget
from mailsvc.app import submit as accept
from mailsvc.app.emails import Emails, Schedules
from mailsvc.config import load
from mailsvc.domain.email import submission_from_json
from mailsvc.mail import dkim
from mailsvc.store import suppressions
from mailsvc.store.groupcommit import GroupCommit
from tests.helpers.polling import async_until
from tests.helpers.sdk import call
from tests.helpers.sending import BODY, message_of, sending_tenant


def another_node(api, clock, config) -> Emails:
    """The email use case of another node on the same database, on ``clock``, wired as compose wires it."""
    schedules = Schedules(threads.deferToThread, config.api.date_languages)
    return Emails(clock, api.parts.db, b"k" * 32, suppressions.suppressed_for, schedules)


@pt.ensureDeferred
async def test_send_get_list_with_the_sdk(api):
    _, key, _ = await sending_tenant(api)
    sent = await call(api, key, resend.Emails.send, {**BODY, "cc": "Bob <bob@example.com>",
                                                     "tags": [{"name": "kind", "value": "welcome"}]})
    email_id = sent["id"]
    got = await call(api, key, resend.Emails.get, email_id)
    assert got["object"] == "email" and got["id"] == email_id
    assert got["to"] == ["ann@example.com"] and got["cc"] == ["Bob <bob@example.com>"] and got["bcc"] == []
    assert got["from"] == "Acme <news@acme.example.com>" and got["subject"] == "Hello"
    assert got["html"] == "<p>Hi Ann</p>" and got["last_event"] == "sent"
    assert got["tags"] == [{"name": "kind", "value": "welcome"}]
    assert got["message_id"].endswith("@acme.example.com>")
    listed = await call(api, key, resend.Emails.list)
    assert [e["id"] for e in listed["data"]] == [email_id]
    assert "html" not in listed["data"][0] and listed["data"][0]["last_event"] == "sent"

    rows = await api.parts.db.fetchall(
        "SELECT recipient, status, due_at IS NOT NULL AS due FROM deliveries ORDER BY recipient")
    assert rows == [{"recipient": "ann@example.com", "status": "queued", "due": True},
                    {"recipient": "bob@example.com", "status": "queued", "due": True}]
    sent_events = await api.parts.db.fetchall("SELECT type, data FROM events WHERE type = 'email.sent'")
    assert len(sent_events) == 1
    assert sent_events[0]["data"]["to"] == ["ann@example.com", "bob@example.com"]
    assert sent_events[0]["data"]["tags"] == [{"name": "kind", "value": "welcome"}]


@pt.ensureDeferred
async def test_the_size_limit_is_the_built_messages(api, monkeypatch):
    """Checked against a bound of the built size; past the bound, the message is built to know."""
    _, key, _ = await sending_tenant(api)
    monkeypatch.setattr(mimebudget, "MAX_MESSAGE_BYTES", 3000)
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "html": "<p>x</p>" * 500})
    assert (code, body["message"]) == (422, "attachments: the built message exceeds 40 MiB")
    code, sent, _ = await api.json("POST", "/emails", key, json=BODY)  # its bound passes 3000; itself not
    assert code == 200 and len(await message_of(api.parts.db, sent["id"])) < 3000


@pt.ensureDeferred
async def test_an_email_whose_message_would_pass_the_mime_part_limit_is_refused(api):
    """Its own message, text and html and their alternative, the attachments and their mixed:
    at most 500 MIME parts (mail.max_mime_parts), as a message submitted over SMTP."""
    _, key, _ = await sending_tenant(api)

    def attachments(count: int) -> list[dict]:
        return [{"filename": f"{i}.txt", "content": "aGk="} for i in range(count)]

    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "attachments": attachments(497)})
    assert (code, body["name"]) == (422, "validation_error")
    assert body["message"] == ("attachments: the message would have 501 MIME parts, more than 500"
                               " (mail.max_mime_parts is 500)")
    assert await api.parts.db.fetchall("SELECT id FROM emails") == []
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "attachments": attachments(496)})
    assert code == 200, sent


@pt.ensureDeferred
async def test_the_built_message_is_unsigned_and_well_formed(api):
    _, key, _ = await sending_tenant(api)
    _, sent, _ = await api.json("POST", "/emails", key, json={
        **BODY, "bcc": "hidden@example.com", "text": "Hi Ann", "reply_to": ["help@acme.example.com"],
        "headers": {"X-Entity-Ref-ID": "7"},
        "attachments": [{"filename": "a.txt", "content": base64.b64encode(b"attached").decode()}]})
    assert (await api.parts.db.fetchone("SELECT message FROM emails WHERE id = %s", (sent["id"],))) == {
        "message": None}  # its content is the truth: built at delivery
    raw = await message_of(api.parts.db, sent["id"])
    message = email.message_from_bytes(raw, policy=email.policy.strict)
    assert message["DKIM-Signature"] is None  # signed at delivery (tests/integration/test_sign_at_delivery.py)
    assert message["Bcc"] is None and b"hidden@example.com" not in raw
    assert message["Reply-To"] == "help@acme.example.com" and message["X-Entity-Ref-ID"] == "7"
    assert [a.get_filename() for a in message.iter_attachments()] == ["a.txt"]


@pt.ensureDeferred
async def test_send_rules(api):
    tenant, key, domain_id = await sending_tenant(api, plan="growth")
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "from": "x@other.example.com"})
    assert (code, body["name"]) == (403, "validation_error")
    assert "other.example.com" in body["message"] and "not verified" in body["message"]
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "to": []})
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("to")
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "attachments": [{"filename": "x"}]})
    assert (code, body["name"]) == (422, "invalid_attachment")
    # A key restricted to another domain.
    _, other, _ = await api.json("POST", "/domains", key, json={"name": "second.example.com"})
    code, restricted, _ = await api.json("POST", "/api-keys", key, json={"name": "r", "domain_id": domain_id})
    assert code == 200
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (other["id"],))
    code, body, _ = await api.json("POST", "/emails", restricted["token"],
                                   json={**BODY, "from": "a@second.example.com"})
    assert (code, body["name"]) == (403, "validation_error") and "restricted" in body["message"]
    code, _, _ = await api.json("POST", "/emails", restricted["token"], json=BODY)
    assert code == 200
    # An address repeated is one recipient with one copy; 51 different ones are too many.
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "to": ["ann@example.com"] * 51,
                                                                 "bcc": ["Ann@Example.com"]})
    assert code == 200
    code, got, _ = await api.json("GET", f"/v1/emails/{sent['id']}", key)
    assert (got["to"], got["bcc"]) == (["ann@example.com"], ["Ann@example.com"])
    assert [d["recipient"] for d in got["deliveries"]] == ["ann@example.com"]
    code, body, _ = await api.json("POST", "/emails", key,
                                   json={**BODY, "to": [f"r{i}@example.com" for i in range(51)]})
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("to")
    # A paused account.
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                   json={"status": "paused", "status_reason": "bounce rate"})
    code, body, _ = await api.json("POST", "/emails", key, json=BODY)
    assert (code, body["name"]) == (403, "validation_error") and "paused" in body["message"]


@pt.ensureDeferred
async def test_idempotency(api):
    _, key, _ = await sending_tenant(api)
    headers = {"Idempotency-Key": "order-1"}
    code, first, r1 = await api.json("POST", "/emails", key, json=BODY, headers=headers)
    code2, second, r2 = await api.json("POST", "/emails", key, json=BODY, headers=headers)
    assert code == code2 == 200 and first == second
    assert r2.headers.getRawHeaders("idempotent-replayed") == ["true"]
    assert r1.headers.getRawHeaders("idempotent-replayed") is None
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "subject": "other"}, headers=headers)
    assert (code, body["name"]) == (409, "invalid_idempotent_request")
    code, body, _ = await api.json("POST", "/emails", key, json=BODY, headers={"Idempotency-Key": "k" * 257})
    assert (code, body["name"]) == (400, "invalid_idempotency_key")
    # A 4xx is stored and replayed too.
    bad = {**BODY, "to": "nobody"}
    c1, b1, _ = await api.json("POST", "/emails", key, json=bad, headers={"Idempotency-Key": "bad"})
    c2, b2, r = await api.json("POST", "/emails", key, json=bad, headers={"Idempotency-Key": "bad"})
    assert c1 == c2 == 422 and b1 == b2 and r.headers.getRawHeaders("idempotent-replayed") == ["true"]
    # Concurrent twins: one email, the other request replays or is told it is in flight.
    results = await defer.gatherResults([
        defer.ensureDeferred(api.json("POST", "/emails", key, json=BODY, headers={"Idempotency-Key": "twin"}))
        for _ in range(4)])
    ids = {body.get("id") for code, body, _ in results if code == 200}
    assert len(ids) == 1
    assert all(code == 200 or body["name"] == "concurrent_idempotent_requests" for code, body, _ in results)
    rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM emails")
    assert rows[0]["n"] == 2


@pt.ensureDeferred
async def test_batch_strict_and_permissive(api):
    _, key, _ = await sending_tenant(api)
    items = [{**BODY, "to": f"r{i}@example.com"} for i in range(3)]
    result = await call(api, key, resend.Batch.send, items)
    assert len(result["data"]) == 3 and "errors" not in result
    bad = [*items[:1], {**BODY, "to": "broken"}, *items[2:]]
    code, body, _ = await api.json("POST", "/emails/batch", key, json=bad)
    assert code == 422 and body["message"].startswith("[1] to")
    code, body, _ = await api.json("POST", "/emails/batch", key, json=bad,
                                   headers={"x-batch-validation": "permissive"})
    assert code == 200 and len(body["data"]) == 2
    assert body["errors"] == [{"index": 1, "message": body["errors"][0]["message"]}]
    code, body, _ = await api.json("POST", "/emails/batch", key,
                                   json=[{**BODY, "attachments": [{"filename": "a.txt", "content": "aGk="}]}])
    assert code == 422 and body["message"].startswith("[0] attachments")
    code, body, _ = await api.json("POST", "/emails/batch", key, json=[BODY] * 101)
    assert code == 422
    rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM emails")
    assert rows[0]["n"] == 5


@pt.ensureDeferred
async def test_quotas_count_accepted_recipients_and_refuse_a_batch_whole(api):
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"daily_quota": 5})
    code, _, _ = await api.json("POST", "/emails", key, json={**BODY, "to": ["a@example.com", "b@example.com"]})
    assert code == 200
    batch = [{**BODY, "to": f"r{i}@example.com"} for i in range(4)]
    code, body, response = await api.json("POST", "/emails/batch", key, json=batch)
    assert (code, body["name"]) == (429, "daily_quota_exceeded")
    assert response.headers.getRawHeaders("retry-after") is None
    code, _, _ = await api.json("POST", "/emails/batch", key, json=batch[:3])
    assert code == 200
    code, body, _ = await api.json("POST", "/emails", key, json=BODY)
    assert (code, body["name"]) == (429, "daily_quota_exceeded")
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                   json={"daily_quota": 100, "monthly_quota": 5})
    code, body, _ = await api.json("POST", "/emails", key, json=BODY)
    assert (code, body["name"]) == (429, "monthly_quota_exceeded")
    with pytest.raises(resend.exceptions.RateLimitError):
        await call(api, key, resend.Emails.send, BODY)


async def sends_behind_a_held_usage_row(api, key, tenant_id: str, count: int,
                                        others: tuple[tuple[str, str], ...] = ()) -> list[tuple[int, dict]]:
    """
    ``count`` concurrent sends with ``key`` (then one for each ``(key, from)`` of ``others``) while
    another transaction holds the tenant's usage rows: the first statements wait on the lock,
    the requests after them queue in the node and are written together once it is released.
    """
    locked, release = defer.Deferred(), defer.Deferred()

    async def hold(txn):
        await txn.execute("SELECT 1 FROM usage WHERE tenant_id = %s FOR UPDATE", (tenant_id,))
        locked.callback(None)
        await release

    def send(key: str, n: int, sender: str = BODY["from"]):
        body = {**BODY, "from": sender, "to": f"r{n}@example.com"}
        return defer.ensureDeferred(api.json("POST", "/emails", key, json=body))

    async def blocked() -> bool:
        rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        return rows[0]["n"] == accept.CONCURRENT_WRITES

    holding = defer.ensureDeferred(api.parts.db.run("hold usage rows", hold))
    await locked
    sends = [send(key, n) for n in range(accept.CONCURRENT_WRITES)]
    await async_until(blocked, 5, "the sends waiting on the held usage row", interval=0.02)
    later = [(key, BODY["from"])] * (count - len(sends)) + list(others)
    sends += [send(k, n, sender) for n, (k, sender) in enumerate(later, start=len(sends))]

    async def queued() -> bool:
        return api.parts.submitter.waiting == len(sends) - accept.CONCURRENT_WRITES

    await async_until(queued, 5, "the later sends queued behind the writes", interval=0.02)
    release.callback(None)
    await holding
    return [(code, body) for code, body, _ in await defer.gatherResults(sends)]


@pt.ensureDeferred
async def test_concurrent_sends_are_written_together(api):
    tenant, key, _ = await sending_tenant(api)
    code, _, _ = await api.json("POST", "/emails", key, json=BODY)  # the usage rows exist
    assert code == 200
    outcomes = await sends_behind_a_held_usage_row(api, key, tenant["id"], 12)
    assert [code for code, _ in outcomes] == [200] * 12
    rows = await api.parts.db.fetchall(
        "SELECT count(*) AS emails, count(DISTINCT xmin::text) AS transactions FROM emails WHERE id = ANY(%s::uuid[])",
        ([body["id"] for _, body in outcomes],))
    # The statements that waited on the lock, then one for all the others.
    assert rows == [{"emails": 12, "transactions": accept.CONCURRENT_WRITES + 1}]
    usage = await api.parts.db.fetchall("SELECT count FROM usage WHERE tenant_id = %s", (tenant["id"],))
    assert [u["count"] for u in usage] == [13, 13]


@pt.ensureDeferred
async def test_one_group_charges_each_tenant(api):
    first, key, _ = await sending_tenant(api)
    second, other_key, _ = await sending_tenant(api, domain="beta.example.com")
    other = (other_key, "news@beta.example.com")
    for k, sender in ((key, BODY["from"]), other):
        code, _, _ = await api.json("POST", "/emails", k, json={**BODY, "from": sender})
        assert code == 200
    outcomes = await sends_behind_a_held_usage_row(api, key, first["id"], 4, others=(other,) * 3)
    assert [code for code, _ in outcomes] == [200] * 7
    # The first tenant's 2 sends that waited on the lock, then one statement for its other 2
    # and the second tenant's 3.
    grouped = await api.parts.db.fetchall(
        "SELECT count(DISTINCT xmin::text) AS transactions, count(DISTINCT tenant_id) AS tenants FROM emails"
        " WHERE id = ANY(%s::uuid[])", ([body["id"] for _, body in outcomes[accept.CONCURRENT_WRITES:]],))
    assert grouped == [{"transactions": 1, "tenants": 2}]
    usage = {(str(u["tenant_id"]), u["period"][:3]): u["count"] for u in await api.parts.db.fetchall(
        "SELECT tenant_id, period, count FROM usage WHERE tenant_id = ANY(%s::uuid[])",
        ([first["id"], second["id"]],))}
    assert usage == {(first["id"], "day"): 5, (first["id"], "mon"): 5,
                     (second["id"], "day"): 4, (second["id"], "mon"): 4}


@pt.ensureDeferred
async def test_a_refused_group_is_written_one_request_at_a_time(api):
    tenant, key, _ = await sending_tenant(api)
    code, _, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 200
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"daily_quota": 7})
    outcomes = await sends_behind_a_held_usage_row(api, key, tenant["id"], 10)
    # 1 sent before, 2 that waited on the lock, then 4 of the group of 8 one by one.
    assert sorted(code for code, _ in outcomes) == [200] * 6 + [429] * 4
    assert {body["name"] for code, body in outcomes if code == 429} == {"daily_quota_exceeded"}
    accepted = [body["id"] for code, body in outcomes if code == 200]
    rows = await api.parts.db.fetchall("SELECT id FROM emails WHERE tenant_id = %s", (tenant["id"],))
    assert len(rows) == 7 and set(accepted) <= {str(r["id"]) for r in rows}
    usage = await api.parts.db.fetchall("SELECT period, count FROM usage WHERE tenant_id = %s", (tenant["id"],))
    assert [u["count"] for u in usage] == [7, 7]


@pt.ensureDeferred
async def test_suppressed_recipients_are_skipped_and_not_charged(api):
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"daily_quota": 1})
    code, _, _ = await api.json("POST", "/suppressions", key, json={"email": "Gone@Example.com"})
    assert code in (200, 201)
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "to": ["gone@example.com", "ann@example.com"]})
    assert code == 200
    events = await api.parts.db.fetchall("SELECT type, data FROM events ORDER BY id")
    suppressed = [e["data"] for e in events if e["type"] == "email.suppressed"]
    assert [(e["recipient"], e["reason"]) for e in suppressed] == [("gone@example.com", "manual")]
    code, only_suppressed, _ = await api.json("POST", "/emails", key, json={**BODY, "to": "gone@example.com"})
    assert code == 200  # nothing charged, so the quota of 1 still allows it
    _, got, _ = await api.json("GET", f"/emails/{only_suppressed['id']}", key)
    assert got["last_event"] == "suppressed"
    code, body, _ = await api.json("POST", "/emails", key, json=BODY)
    assert (code, body["name"]) == (429, "daily_quota_exceeded")


@pt.ensureDeferred
async def test_schedule_reschedule_cancel(api):
    _, key, _ = await sending_tenant(api)
    sent = await call(api, key, resend.Emails.send, {**BODY, "scheduled_at": "in 1 hour"})
    got = await call(api, key, resend.Emails.get, sent["id"])
    assert got["last_event"] == "scheduled" and got["scheduled_at"]
    updated = await call(api, key, resend.Emails.update, {"id": sent["id"], "scheduled_at": "in 2 hours"})
    assert updated["id"] == sent["id"]
    canceled = await call(api, key, resend.Emails.cancel, sent["id"])
    assert canceled["id"] == sent["id"]
    assert (await call(api, key, resend.Emails.get, sent["id"]))["last_event"] == "canceled"
    code, body, _ = await api.json("POST", f"/emails/{sent['id']}/cancel", key)
    assert (code, body["name"]) == (409, "not_cancelable")
    code, body, _ = await api.json("PATCH", f"/emails/{sent['id']}", key, json={"scheduled_at": "in 3 hours"})
    assert (code, body["name"]) == (409, "not_reschedulable")
    immediate = await call(api, key, resend.Emails.send, BODY)
    code, body, _ = await api.json("POST", f"/emails/{immediate['id']}/cancel", key)
    assert (code, body["name"]) == (409, "not_cancelable")
    code, body, _ = await api.json("POST", "/emails/not-a-uuid/cancel", key)
    assert code == 404


@pt.ensureDeferred
async def test_scheduled_mail_is_released_once_by_two_nodes(api, config):
    from twisted.internet import task


    _, key, _ = await sending_tenant(api)
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "scheduled_at": "in 1 min"})
    clock = task.Clock()
    clock.advance(reactor.seconds() + 120)
    nodes = [another_node(api, clock, config) for _ in range(2)]
    released = await defer.gatherResults([defer.ensureDeferred(n.release_due()) for n in nodes])
    assert sorted(released) == [0, 1]
    _, got, _ = await api.json("GET", f"/emails/{sent['id']}", key)
    assert got["last_event"] == "sent"
    rows = await api.parts.db.fetchall("SELECT type FROM events WHERE type = 'email.sent'")
    assert len(rows) == 1
    deliveries = await api.parts.db.fetchall("SELECT status, retry_until - updated_at AS window FROM deliveries")
    assert [(d["status"], d["window"].total_seconds()) for d in deliveries] == [("queued", 72 * 3600)]


@pt.ensureDeferred
async def test_one_release_takes_every_due_email_of_several_accounts(api, config):
    from twisted.internet import task


    _, key, _ = await sending_tenant(api)
    capturing, capture_key, _ = await sending_tenant(api, domain="beta.example.com")
    await api.json("PATCH", f"/admin/v1/tenants/{capturing['id']}", api.operator_token,
                   json={"delivery_mode": "capture"})
    later = {**BODY, "scheduled_at": "in 1 min"}
    _, mixed, _ = await api.json("POST", "/emails", key, json={**later, "to": ["ann@example.com", "gone@example.com"]})
    _, gone, _ = await api.json("POST", "/emails", key, json={**later, "to": "gone@example.com"})
    _, captured, _ = await api.json("POST", "/emails", capture_key,
                                    json={**later, "from": "news@beta.example.com", "to": "gone@example.com"})
    await api.json("POST", "/suppressions", key, json={"email": "gone@example.com"})  # the first account's only

    clock = task.Clock()
    clock.advance(reactor.seconds() + 120)
    assert await another_node(api, clock, config).release_due() == 3
    last_events = {}
    for sent, k in ((mixed, key), (gone, key), (captured, capture_key)):
        _, got, _ = await api.json("GET", f"/emails/{sent['id']}", k)
        last_events[sent["id"]] = got["last_event"]
    # Capture mode queues like direct mode: the delivery worker signs it and stops it at the door.
    assert last_events == {mixed["id"]: "sent", gone["id"]: "suppressed", captured["id"]: "sent"}
    statuses = await api.parts.db.fetchall(
        "SELECT email_id::text, recipient, status, due_at IS NOT NULL AS due FROM deliveries ORDER BY id")
    assert {(d["email_id"], d["recipient"]): (d["status"], d["due"]) for d in statuses} == {
        (mixed["id"], "ann@example.com"): ("queued", True), (mixed["id"], "gone@example.com"): ("suppressed", False),
        (gone["id"], "gone@example.com"): ("suppressed", False),
        (captured["id"], "gone@example.com"): ("queued", True)}
    released = await api.parts.db.fetchall(
        "SELECT type, data->>'email_id' AS email, data->'to' AS live FROM events ORDER BY id")
    assert [(e["type"], e["email"], e["live"]) for e in released] == [
        ("email.sent", mixed["id"], ["ann@example.com"]),
        ("email.suppressed", mixed["id"], ["ann@example.com"]),
        ("email.suppressed", gone["id"], []),
        ("email.sent", captured["id"], ["gone@example.com"])]


@pt.ensureDeferred
async def test_the_release_gives_the_store_typed_states(api):
    from mailsvc import timefmt
    from mailsvc.store import emails as rows

    _, key, _ = await sending_tenant(api)
    _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "scheduled_at": "in 1 min"})
    (delivery,) = await api.parts.db.fetchall("SELECT id FROM deliveries")
    now = timefmt.from_seconds(1_800_000_000)
    await api.parts.db.run("release", rows.release, now,
                           [rows.ReleasedDelivery(delivery["id"], "queued", now, None)],
                           [rows.ReleasedEmail(uuid.UUID(sent["id"]), "sent")])
    assert await api.parts.db.fetchone("SELECT status, due_at, updated_at, retry_until FROM deliveries") == {
        "status": "queued", "due_at": now, "updated_at": now, "retry_until": None}
    assert await api.parts.db.fetchone("SELECT status, last_event FROM emails") == {
        "status": "queued", "last_event": "sent"}


@pt.ensureDeferred
async def test_capture_mode_queues_mail_like_direct_mode(api):
    """It is signed and kept in the inbox by the delivery worker (tests/integration/test_delivery.py)."""
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"delivery_mode": "capture"})
    _, sent, _ = await api.json("POST", "/emails", key, json=BODY)
    _, got, _ = await api.json("GET", f"/emails/{sent['id']}", key)
    assert got["last_event"] == "sent"
    _, native, _ = await api.json("GET", f"/v1/emails/{sent['id']}", key)
    assert [d["status"] for d in native["deliveries"]] == ["queued"]


@pt.ensureDeferred
async def test_attachments_and_signed_download_links(api):
    _, key, _ = await sending_tenant(api)
    _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "attachments": [
        {"filename": "report.pdf", "content": base64.b64encode(b"%PDF-1.4 body").decode()},
        {"filename": "logo.png", "content": "iVBORw0KGgo=", "content_id": "logo"}]})
    code, listed, _ = await api.json("GET", f"/emails/{sent['id']}/attachments", key)
    assert code == 200 and len(listed["data"]) == 2
    pdf = next(a for a in listed["data"] if a["filename"] == "report.pdf")
    assert pdf["content_disposition"] == "attachment" and pdf["size"] == 13
    assert pdf["expires_at"].endswith("Z")
    logo = next(a for a in listed["data"] if a["filename"] == "logo.png")
    assert logo["content_disposition"] == "inline" and logo["content_id"] == "logo"
    code, one, _ = await api.json("GET", f"/emails/{sent['id']}/attachments/{pdf['id']}", key)
    assert one["object"] == "attachment"
    path = pdf["download_url"].split(api.url.split("//")[1], 1)[1]
    response, content = await api.request("GET", path)
    assert response.code == 200 and content == b"%PDF-1.4 body"
    assert response.headers.getRawHeaders("x-content-type-options") == ["nosniff"]
    assert response.headers.getRawHeaders("cache-control") == ["no-store"]
    assert response.headers.getRawHeaders("content-security-policy") == ["sandbox; default-src 'none'"]
    tampered = path[:-2] + ("AA" if not path.endswith("AA") else "BB")
    response, body = await api.request("GET", tampered)
    assert response.code == 403 and json.loads(body)["name"] == "validation_error"


@pt.ensureDeferred
async def test_a_downloaded_html_or_svg_attachment_runs_nothing(api):
    """Served from the dashboard's origin: a download, and a sandbox that loads nothing if rendered."""
    _, key, _ = await sending_tenant(api)
    page = b"<html><script>fetch('/dashboard/api/session')</script></html>"
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "attachments": [
        {"filename": "page.html", "content": base64.b64encode(page).decode()},
        {"filename": "logo.svg", "content": base64.b64encode(svg).decode()}]})
    _, listed, _ = await api.json("GET", f"/emails/{sent['id']}/attachments", key)
    served = {}
    for attachment in listed["data"]:
        response, content = await api.request("GET", attachment["download_url"].split(api.url.split("//")[1], 1)[1])
        served[attachment["filename"]] = (response.code, content, *(
            response.headers.getRawHeaders(name, [None])[0] for name in (
                "content-type", "content-security-policy", "x-content-type-options", "content-disposition")))
    assert served == {
        "page.html": (200, page, "text/html", "sandbox; default-src 'none'", "nosniff",
                      "attachment; filename*=UTF-8''page.html"),
        "logo.svg": (200, svg, "image/svg+xml", "sandbox; default-src 'none'", "nosniff",
                     "attachment; filename*=UTF-8''logo.svg"),
    }


@pt.ensureDeferred
async def test_native_surface(api):
    _, key, _ = await sending_tenant(api)
    code, sent, _ = await api.json("POST", "/v1/emails", key, json=BODY)
    assert code == 200 and sent["object"] == "email"
    code, got, _ = await api.json("GET", f"/v1/emails/{sent['id']}", key)
    assert code == 200 and [d["recipient"] for d in got["deliveries"]] == ["ann@example.com"]
    code, body, _ = await api.json("POST", "/v1/emails", key, json={**BODY, "from": "a@nope.example.com"})
    assert code == 403 and body["error"]["code"] == "domain_not_verified"
    code, batch, _ = await api.json("POST", "/v1/emails/batch", key, json=[BODY, BODY])
    assert code == 200 and len(batch["data"]) == 2
    # Atomic: the main surface's permissive mode does not apply, one bad item refuses the batch.
    code, body, _ = await api.json("POST", "/v1/emails/batch", key, json=[BODY, {**BODY, "to": "broken"}],
                                   headers={"x-batch-validation": "permissive"})
    assert (code, body["error"]["code"]) == (422, "validation_error") and body["error"]["message"].startswith("[1] to")
    code, listed, _ = await api.json("GET", "/v1/emails?limit=2", key)
    assert code == 200 and len(listed["data"]) == 2 and listed["has_more"] is True
    rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM emails")
    assert rows[0]["n"] == 3


@pt.ensureDeferred
async def test_sending_access_key_may_send_and_read_but_not_list(api):
    _, key, _ = await sending_tenant(api)
    _, sender, _ = await api.json("POST", "/api-keys", key, json={"name": "s", "permission": "sending_access"})
    code, sent, _ = await api.json("POST", "/emails", sender["token"], json=BODY)
    assert code == 200
    code, _, _ = await api.json("GET", f"/emails/{sent['id']}", sender["token"])
    assert code == 200
    code, body, _ = await api.json("GET", "/emails", sender["token"])
    assert (code, body["name"]) == (401, "restricted_api_key")
    _, other_key = await api.tenant(name="Other")
    code, _, _ = await api.json("GET", f"/emails/{sent['id']}", other_key)
    assert code == 404


@pt.ensureDeferred
async def test_a_domain_restricted_key_reads_only_mail_sent_from_its_domain(api):
    _, key, domain_id = await sending_tenant(api, plan="growth")
    _, second, _ = await api.json("POST", "/domains", key, json={"name": "second.example.com"})
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (second["id"],))
    _, restricted, _ = await api.json("POST", "/api-keys", key, json={"name": "r", "domain_id": domain_id})
    _, own, _ = await api.json("POST", "/emails", restricted["token"], json=BODY)
    _, other, _ = await api.json("POST", "/emails", key, json={**BODY, "from": "a@second.example.com"})
    for path in ("/emails", "/v1/emails"):
        code, got, _ = await api.json("GET", f"{path}/{own['id']}", restricted["token"])
        assert (code, got["id"]) == (200, own["id"])
        code, refused, _ = await api.json("GET", f"{path}/{other['id']}", restricted["token"])
        code_absent, absent, _ = await api.json("GET", f"{path}/{uuid.uuid4()}", restricted["token"])
        for body in (refused, absent):
            body.get("error", {}).pop("request_id", None)
        assert code == code_absent == 404 and refused == absent
    code, _, _ = await api.json("GET", f"/emails/{other['id']}", key)
    assert code == 200


@pt.ensureDeferred
async def test_sent_mail_verifies_with_dkimpy_through_the_loopback_dns(api, dns_server):
    import dns.resolver
    from twisted.internet import threads

    from tests.helpers.dkim import verify_all
    from tests.helpers.domainsupport import publish

    tenant, key = await api.tenant()
    created = await call(api, key, resend.Domains.create, {"name": "signed.example.com"})
    publish(dns_server, created)
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    _, sent, _ = await api.json("POST", "/emails", key, json={
        **BODY, "from": "Signed <hello@signed.example.com>", "subject": "Grüße", "text": "line\n.dot\n",
        "attachments": [{"filename": "a.bin", "content": base64.b64encode(bytes(range(256))).decode()}]})
    unsigned = await message_of(api.parts.db, sent["id"])
    # Built unsigned; signed as the delivery worker signs it (at the sink: tests/integration/test_sign_at_delivery.py).
    domain = await api.parts.domains.lookup_sending_domain(uuid.UUID(tenant["id"]), "signed.example.com")
    signed = dkim.sign(unsigned, domain.name, domain.signers) + unsigned

    def lookup(name, timeout=5):
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], dns_server.port
        answer = resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
        return b"".join(b"".join(rr.strings) for rr in answer)

    assert await threads.deferToThread(verify_all, signed, lookup) == [True, True]


@pt.ensureDeferred
async def test_suppression_applies_to_batches_and_scheduled_release(api, config):
    from twisted.internet import task


    _, key, _ = await sending_tenant(api)
    await api.json("POST", "/suppressions", key, json={"email": "gone@example.com"})
    code, body, _ = await api.json("POST", "/emails/batch", key, json=[
        {**BODY, "to": "gone@example.com"}, {**BODY, "to": "ann@example.com"}])
    assert code == 200
    _, first, _ = await api.json("GET", f"/emails/{body['data'][0]['id']}", key)
    assert first["last_event"] == "suppressed"
    # Scheduled, then suppressed before its release: skipped at release time.
    _, scheduled, _ = await api.json("POST", "/emails", key, json={**BODY, "to": "later@example.com",
                                                                   "scheduled_at": "in 1 min"})
    await api.json("POST", "/suppressions", key, json={"email": "later@example.com"})
    clock = task.Clock()
    clock.advance(reactor.seconds() + 120)
    assert await another_node(api, clock, config).release_due() == 1
    _, got, _ = await api.json("GET", f"/emails/{scheduled['id']}", key)
    assert got["last_event"] == "suppressed"
    reasons = await api.parts.db.fetchall(
        "SELECT data->>'recipient' AS r FROM events WHERE type = 'email.suppressed' ORDER BY id")
    assert [row["r"] for row in reasons] == ["gone@example.com", "later@example.com"]


class TestGroupFailures:
    """What a failed group statement means for its requests (``GroupCommit``)."""

    @staticmethod
    async def stores_behind_two_writes(failure: Exception) -> tuple[list[int], list]:
        """
        Two writes in flight, then three requests that queue and form one group, whose
        statement fails with ``failure``; returns the sizes of the groups written and what
        each of the three got.
        """
        sizes: list[int] = []
        held = [defer.Deferred() for _ in range(accept.CONCURRENT_WRITES)]

        async def write(group):
            sizes.append(len(group))
            if len(sizes) <= len(held):
                await held[len(sizes) - 1]
            elif len(group) > 1:
                raise failure
            return [[accept.AcceptedEmail(uuid.uuid4(), "sent")] for _ in group]

        writes = GroupCommit(write, accept.CONCURRENT_WRITES, accept.GROUP_REQUESTS, accept.GROUP_BYTES)
        first = [defer.ensureDeferred(writes.add(None, 0)) for _ in held]
        queued = [defer.ensureDeferred(writes.add(None, 0)) for _ in range(3)]
        for d in held:
            d.callback(None)
        await defer.gatherResults(first)
        outcomes = await defer.DeferredList(queued, consumeErrors=True)
        return sizes[len(held):], [value if ok else value.value for ok, value in outcomes]

    @pt.ensureDeferred
    async def test_a_refused_group_is_written_again_one_request_at_a_time(self, api):
        try:
            await api.parts.db.execute("SELECT 1 / 0")
        except psycopg2.Error as e:
            refused = e  # as PostgreSQL refuses a statement: with a SQLSTATE
        sizes, outcomes = await self.stores_behind_two_writes(refused)
        assert sizes == [3, 1, 1, 1]
        assert all(isinstance(o, list) and len(o) == 1 for o in outcomes)

    @pt.ensureDeferred
    async def test_a_group_whose_connection_was_lost_is_not_written_again(self):
        # No SQLSTATE: the statement may have committed before the connection went.
        lost = psycopg2.OperationalError("server closed the connection unexpectedly")
        sizes, outcomes = await self.stores_behind_two_writes(lost)
        assert sizes == [3]
        assert outcomes == [lost] * 3

    @pytest.mark.parametrize("unsent", [ValueError("A string literal cannot contain NUL (0x00) characters."),
                                        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
                                        TypeError("not a value")])
    @pt.ensureDeferred
    async def test_a_group_never_sent_for_a_value_is_written_again_one_request_at_a_time(self, unsent):
        sizes, outcomes = await self.stores_behind_two_writes(unsent)
        assert sizes == [3, 1, 1, 1]
        assert all(isinstance(o, list) and len(o) == 1 for o in outcomes)


@pt.ensureDeferred
async def test_a_value_the_driver_refuses_fails_only_its_own_request(api, monkeypatch):
    first, key, _ = await sending_tenant(api)
    second, other_key, _ = await sending_tenant(api, domain="beta.example.com")
    other = (other_key, "news@beta.example.com")
    for k, sender in ((key, BODY["from"]), other):
        code, _, _ = await api.json("POST", "/emails", k, json={**BODY, "from": sender})
        assert code == 200

    def slipping_past_the_edge(body, now, **kwargs):
        """A NUL in the text of the send to r4@ only, as if the edge had let it through."""
        submission = submission_from_json(body, now, **kwargs)
        if body["to"] == "r4@example.com":
            return attrs.evolve(submission, text="a\x00b")
        return submission

    monkeypatch.setattr("mailsvc.http.api.emails.submission_from_json", slipping_past_the_edge)
    # The first tenant's sends 0 and 1 wait on the lock; 2 to 4, and the second tenant's 5 to 7, queue as one group.
    outcomes = await sends_behind_a_held_usage_row(api, key, first["id"], 5, others=(other,) * 3)
    assert [code for code, _ in outcomes] == [200] * 4 + [500] + [200] * 3
    accepted = [body["id"] for code, body in outcomes if code == 200]
    stored = await api.parts.db.fetchall("SELECT id::text, text FROM emails WHERE id = ANY(%s::uuid[])", (accepted,))
    assert len(stored) == 7 and not any(row["text"] and "\x00" in row["text"] for row in stored)
    usage = {(str(u["tenant_id"]), u["period"][:3]): u["count"] for u in await api.parts.db.fetchall(
        "SELECT tenant_id, period, count FROM usage WHERE tenant_id = ANY(%s::uuid[])",
        ([first["id"], second["id"]],))}
    assert usage == {(first["id"], "day"): 5, (first["id"], "mon"): 5,
                     (second["id"], "day"): 4, (second["id"], "mon"): 4}


# Test addresses and reserved names

TEST_SEND = {"from": "Acme <onboarding@resend.dev>", "to": ["delivered@resend.dev"], "subject": "Hello",
             "html": "<p>Hi</p>"}


@pt.ensureDeferred
async def test_the_test_sender_needs_no_domain_for_test_addresses(api):
    tenant, key = await api.tenant()
    code, sent, _ = await api.json("POST", "/emails", key, json={
        **TEST_SEND, "to": ["delivered+signup@resend.dev", "Bounced <bounced@resend.dev>"],
        "cc": "complained@resend.dev", "bcc": "delivered+b@RESEND.dev"})
    assert code == 200, sent
    _, got, _ = await api.json("GET", f"/emails/{sent['id']}", key)
    assert got["last_event"] == "sent" and got["message_id"].endswith("@resend.dev>")
    deliveries = await api.parts.db.fetchall("SELECT status FROM deliveries")
    assert [d["status"] for d in deliveries] == ["queued"] * 4
    row = await api.parts.db.fetchone("SELECT domain_id FROM emails")
    assert row["domain_id"] is None  # the test domain is none of the account's domains
    _, domains, _ = await api.json("GET", "/domains", key)
    assert domains["data"] == []
    usage = await api.parts.db.fetchall("SELECT count FROM usage WHERE tenant_id = %s", (tenant["id"],))
    assert {u["count"] for u in usage} == {4}  # test sends count toward the quotas


@pt.ensureDeferred
async def test_the_test_sender_is_refused_whole_for_any_other_recipient(api):
    _, key, domain_id = await sending_tenant(api, plan="growth")
    for extra in ({"to": ["delivered@resend.dev", "ann@example.com"]}, {"cc": "ann@example.com"},
                  {"bcc": ["ann@example.com"]}, {"to": "hello@resend.dev"}):
        code, body, _ = await api.json("POST", "/emails", key, json={**TEST_SEND, **extra})
        assert (code, body["name"]) == (403, "validation_error"), body
        assert "for testing only" in body["message"] and "add and verify your domain" in body["message"]
        assert ("ann@example.com" in body["message"]) != ("hello@resend.dev" in body["message"])
    code, body, _ = await api.json("POST", "/emails/batch", key, json=[
        {**TEST_SEND}, {**TEST_SEND, "to": "ann@example.com"}])
    assert code == 403 and body["message"].startswith("[1] The resend.dev domain is for testing only")
    assert await api.parts.db.fetchall("SELECT id FROM emails") == []
    # A key restricted to a domain sends from that domain only, the test domain included.
    _, restricted, _ = await api.json("POST", "/api-keys", key, json={"name": "r", "domain_id": domain_id})
    code, body, _ = await api.json("POST", "/emails", restricted["token"], json=TEST_SEND)
    assert (code, body["name"]) == (403, "validation_error") and "restricted to another domain" in body["message"]


@pt.ensureDeferred
async def test_an_unverified_domain_is_told_what_to_do(api):
    _, key = await api.tenant()
    code, body, _ = await api.json("POST", "/emails", key, json={**BODY, "from": "news@acme.example.com"})
    assert (code, body["name"]) == (403, "validation_error")
    assert body["message"] == (
        "The acme.example.com domain is not verified. Please, add and verify your domain. To try sending"
        " without a domain, send from onboarding@resend.dev to a test address (delivered@resend.dev,"
        " bounced@resend.dev, complained@resend.dev).")


@pt.ensureDeferred
async def test_a_suppressed_test_address_is_suppressed_at_accept(api):
    tenant, key = await api.tenant()
    _, sent, _ = await api.json("POST", "/emails", key, json={
        **TEST_SEND, "to": ["suppressed+x@resend.dev", "delivered@resend.dev"]})
    _, got, _ = await api.json("GET", f"/emails/{sent['id']}", key)
    assert got["last_event"] == "sent"
    rows = await api.parts.db.fetchall("SELECT recipient, status FROM deliveries ORDER BY recipient")
    assert [(r["recipient"], r["status"]) for r in rows] == [
        ("delivered@resend.dev", "queued"), ("suppressed+x@resend.dev", "suppressed")]
    (event,) = await api.parts.db.fetchall("SELECT data FROM events WHERE type = 'email.suppressed'")
    assert event["data"]["recipient"] == "suppressed+x@resend.dev" and event["data"]["reason"] == "manual"
    _, listed, _ = await api.json("GET", "/suppressions", key)
    assert listed["data"] == []  # as if listed: nothing is written to the account's list


@pytest.mark.parametrize("config", [load(None, environ={})], ids=["defaults"])
@pt.ensureDeferred
async def test_reserved_names_are_refused_naming_the_test_addresses(api, config):
    _, key, _ = await sending_tenant(api, domain="acme.dev")
    body = {**BODY, "from": "news@acme.dev", "to": "ann@real.dev"}
    for field, address in (("to", "ann@example.com"), ("to", "Ann <ann@mail.example.org>"),
                           ("cc", "bob@test.com"), ("bcc", "x@host.invalid"), ("to", "y@box.test"),
                           ("cc", "z@app.localhost"), ("bcc", "w@shop.example"), ("to", "v@Example.NET")):
        code, refused, _ = await api.json("POST", "/emails", key, json={**body, field: address})
        assert (code, refused["name"]) == (422, "validation_error"), (address, refused)
        assert refused["message"].startswith(f"{field}: "), refused
        assert "delivered@resend.dev" in refused["message"] and "reserved domain" in refused["message"]
    code, sent, _ = await api.json("POST", "/emails", key, json={**body, "cc": "c@testing.com"})
    assert code == 200, sent
    code, sent, _ = await api.json("POST", "/emails", key, json=TEST_SEND)
    assert code == 200, sent
