"""
The one submit contract (``mailsvc.app.submit``): which outcomes an idempotency key keeps over
HTTP and SMTP alike, a claim that no longer holds, and a sender that is no API key.
"""

import uuid

import pytest
import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc import timefmt
from mailsvc.app.idempotency import IdempotencyKey, IdempotencyKeys
from mailsvc.app.submit import Item, ServiceSender
from mailsvc.domain.email import Mailbox, submission_from_json
from mailsvc.domain.errors import IdempotencyClaimLost
from mailsvc.store import accept, accounts
from mailsvc.store.accept import AcceptRows, AttachmentRow, Completion, DeliveryRow, EmailRow, EventRow
from tests.helpers.sending import BODY, sending_tenant
from tests.helpers.smtp import message, submit


@pt.ensureDeferred
async def test_http_keeps_a_refusal_and_replays_it(api):
    _, key, _ = await sending_tenant(api)
    headers = {"Idempotency-Key": "bad-1"}
    bad = {**BODY, "to": ["not an address"]}
    code, first, _ = await api.json("POST", "/emails", key, json=bad, headers=headers)
    code2, second, response = await api.json("POST", "/emails", key, json=bad, headers=headers)
    assert (code, code2, first["name"]) == (422, 422, "validation_error") and first == second
    assert response.headers.getRawHeaders("idempotent-replayed") == ["true"]


@pt.ensureDeferred
async def test_http_strict_batch_keeps_the_refused_item(api):
    _, key, _ = await sending_tenant(api)
    headers = {"Idempotency-Key": "batch-1"}
    batch = [BODY, {**BODY, "from": "x@unverified.example.com"}]
    code, first, _ = await api.json("POST", "/emails/batch", key, json=batch, headers=headers)
    assert (code, first["name"]) == (403, "validation_error") and first["message"].startswith("[1] ")
    code2, second, response = await api.json("POST", "/emails/batch", key, json=batch, headers=headers)
    assert (code2, second) == (code, first) and response.headers.getRawHeaders("idempotent-replayed") == ["true"]
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM emails") == {"n": 0}


@pt.ensureDeferred
async def test_smtp_keeps_a_refusal_as_http_does(api, smtp_ports, pem):  # noqa: F811 (fixtures)
    _, key, domain_id = await sending_tenant(api)
    await api.parts.db.execute("UPDATE domains SET status = 'pending' WHERE id = %s", (domain_id,))

    def attempt(idempotency_key):
        msg = message(Resend_Idempotency_Key=idempotency_key)
        try:
            submit(smtp_ports["implicit"], pem, key, msg, implicit=True)
        except Exception as e:
            return e.smtp_code, e.smtp_error
        return 250, b""

    code, text = await threads.deferToThread(attempt, "smtp-refused")
    assert code == 550 and text.startswith(b"5.7.1") and b"not verified" in text
    # The domain is verified since, but the key keeps its refusal; a new key sends.
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (domain_id,))
    assert await threads.deferToThread(attempt, "smtp-refused") == (code, text)
    assert (await threads.deferToThread(attempt, "smtp-new"))[0] == 250
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM emails") == {"n": 1}


@pt.ensureDeferred
async def test_a_service_sender_needs_no_key(api):
    tenant, _, _ = await sending_tenant(api)
    account = await accounts.get_tenant(api.parts.db, uuid.UUID(tenant["id"]))
    item = Item(lambda now: submission_from_json(BODY, now))
    outcome = await api.parts.submitter.submit(ServiceSender(account), [item], "broadcast")
    (accepted,) = outcome.accepted
    row = await api.parts.db.fetchone("SELECT source, tenant_id FROM emails WHERE id = %s", (accepted.id,))
    assert row == {"source": "broadcast", "tenant_id": account.id}


@pt.ensureDeferred
async def test_the_final_write_needs_the_claim_to_hold(api):
    tenant, _, _ = await sending_tenant(api)
    tenant_id = uuid.UUID(tenant["id"])
    keys = IdempotencyKeys(reactor, api.parts.db)  # another node's: the claims are in the database
    claim = await keys.claim(tenant_id, IdempotencyKey("k", b"h" * 32))
    # Another request took the key over (as it may once the lease ran out).
    await api.parts.db.execute("UPDATE idempotency_keys SET locked_until = locked_until + interval '1 second'")
    rows = AcceptRows()
    rows.completions.append(Completion(tenant_id, claim.key, claim.token, 200, b"{}"))
    rows.events.append(EventRow(tenant_id, "email.sent", {"email_id": "x"}))
    with pytest.raises(IdempotencyClaimLost):
        await accept.write(api.parts.db, reactor, rows, timefmt.from_seconds(0))
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM events") == {"n": 0}
    with pytest.raises(IdempotencyClaimLost):
        await keys.complete(api.parts.db, claim, 200, b"{}")
    await keys.release(claim)  # a lost claim is not released: the new holder keeps it
    assert await api.parts.db.fetchone("SELECT state FROM idempotency_keys") == {"state": "pending"}


@pt.ensureDeferred
async def test_the_accept_statement_encodes_typed_rows_itself(api):
    """The use case gives rows by name; the store writes each column as the API reads it back."""
    tenant, _, domain_id = await sending_tenant(api)
    tenant_id, domain_id = uuid.UUID(tenant["id"]), uuid.UUID(domain_id)
    now = timefmt.from_seconds(1_800_000_000)
    email_id, delivery_id = uuid.uuid4(), uuid.uuid4()
    tags = [{"name": "kind", "value": "welcome"}]
    rows = AcceptRows()
    rows.emails.append(EmailRow(
        id=email_id, tenant_id=tenant_id, domain_id=domain_id, message_id="<m1@acme.example.com>",
        sender="Acme <news@acme.example.com>", to=(Mailbox("Ann", "ann@example.com"),), cc=(),
        bcc=(Mailbox("", "bob@example.com"),), reply_to=(Mailbox("Help, Desk", "help@acme.example.com"),),
        subject="Hello", html="<p>Hi</p>", text=None, tags=tags, stream="transactional", source="api",
        scheduled_at=None, status="queued", last_event="sent", message=b"the message", created_at=now,
        headers=[("X-Entity-Ref-ID", "7")], links_base=None))
    rows.attachments.append(AttachmentRow(
        id=uuid.uuid4(), email_id=email_id, tenant_id=tenant_id, filename="logo.png", content_type="image/png",
        inline=True, content_id="logo", content=b"\x89PNG"))
    rows.deliveries.append(DeliveryRow(
        id=delivery_id, email_id=email_id, tenant_id=tenant_id, recipient="ann@example.com", status="queued",
        due_at=now, updated_at=now, retry_until=None))
    rows.events.append(EventRow(tenant_id, "email.sent", {"email_id": str(email_id)}))
    await accept.write(api.parts.db, api.parts.submitter._clock, rows, now)
    email = await api.parts.db.fetchone(
        "SELECT recipients, tags, signed, status, last_event, convert_from(message, 'UTF8') AS message, headers"
        " FROM emails WHERE id = %s", (email_id,))
    assert email == {
        "recipients": {"to": ["Ann <ann@example.com>"], "cc": [], "bcc": ["bob@example.com"],
                       "reply_to": ['"Help, Desk" <help@acme.example.com>']},
        "tags": tags, "signed": False, "status": "queued", "last_event": "sent", "message": "the message",
        "headers": [["X-Entity-Ref-ID", "7"]]}
    attachment = await api.parts.db.fetchone(
        "SELECT content_disposition, size, content_id FROM attachments WHERE email_id = %s", (email_id,))
    assert attachment == {"content_disposition": "inline", "size": 4, "content_id": "logo"}
    delivery = await api.parts.db.fetchone("SELECT recipient, status, message FROM deliveries WHERE id = %s",
                                           (delivery_id,))
    assert delivery == {"recipient": "ann@example.com", "status": "queued", "message": None}
    event = await api.parts.db.fetchone("SELECT type, data FROM events WHERE tenant_id = %s", (tenant_id,))
    assert event == {"type": "email.sent", "data": {"email_id": str(email_id)}}


def test_the_accept_statement_inlines_values_as_psycopg2_writes_them(pg_dsn):
    """``accept.inlined`` changes nothing of the statement PostgreSQL receives."""
    from datetime import UTC, datetime, timedelta, timezone

    import psycopg2
    import psycopg2.extras

    psycopg2.extras.register_uuid()
    now = datetime(2026, 11, 25, 13, 40, 1, 123456, tzinfo=UTC)
    elsewhere = now.astimezone(timezone(timedelta(hours=2)))  # the same instant, written differently
    sql = "SELECT " + ", ".join(["%s"] * 12) + " WHERE %s::uuid IS NOT NULL"
    parameters = [uuid.uuid4(), now, elsewhere, now, None, True, False, "it's 100% %s text", b"\x00\xff bytes",
                  psycopg2.extras.Json({"to": ["a@b.example"], "n": 1}), 7, datetime(2026, 1, 1), uuid.uuid4()]
    statement, kept = accept.inlined(sql, parameters)
    assert len(kept) == 4  # the text, the bytes, the JSON text and the integer
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        assert cur.mogrify(statement, kept) == cur.mogrify(sql, parameters)
    with pytest.raises(ValueError):
        accept.inlined("SELECT %s", [])
