"""
RFC 8058 one-click unsubscribe on the broadcast stream: a signed link per recipient in
``List-Unsubscribe``, the page behind it (GET changes nothing) and the one-click POST that
suppresses the address. The per-recipient messages are built at delivery, never stored; that both headers are
under every DKIM signature made at delivery is proven at the sink (tests/integration/test_sign_at_delivery.py).
"""

import base64
import json
import uuid

import pytest
import pytest_twisted as pt

from mailsvc.app.unsubscribe import Link, Unsubscribes
from mailsvc.config import load
from mailsvc.crypto.links import signed_link
from mailsvc.domain.errors import LinkRefused
from tests.helpers.sending import BODY, message_of, sending_tenant
from tests.helpers.unsubscribe import BROADCAST, deliveries, link_of, parse, path_of


@pt.ensureDeferred
async def test_each_recipient_gets_its_own_signed_one_click_link(api):
    tenant, key, _ = await sending_tenant(api, "signed.example.com")
    code, sent, _ = await api.json("POST", "/emails", key, json={**BROADCAST, "from": "News <news@signed.example.com>"})
    assert code == 200, sent
    messages = await deliveries(api, sent["id"])
    assert set(messages) == {"ann@example.com", "bob@example.com"}
    links = {}
    for recipient, raw in messages.items():
        message = parse(raw)
        links[recipient] = link_of(message)
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert message["DKIM-Signature"] is None  # signed at delivery
        # The placeholders hold the same link, in html and in text.
        assert message.get_body(("html",)).get_content().count(links[recipient]) == 1
        assert links[recipient] in message.get_body(("plain",)).get_content()
        assert "UNSUBSCRIBE_URL" not in raw.decode("ascii", "replace")
        assert message["To"] == "ann@example.com, bob@example.com"
    assert links["ann@example.com"] != links["bob@example.com"]
    # The token names the account, the email and the recipient.
    token = links["bob@example.com"].rsplit("/", 1)[1]
    raw_token = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw_token[0] == 1 and uuid.UUID(bytes=raw_token[1:17]) == uuid.UUID(tenant["id"])
    assert uuid.UUID(bytes=raw_token[17:33]) == uuid.UUID(sent["id"]) and raw_token[33:-16] == b"bob@example.com"
    # The email's own message is the submission as given: no link, never sent for a broadcast.
    row = await api.parts.db.fetchone("SELECT message, stream FROM emails WHERE id = %s", (sent["id"],))
    assert row["stream"] == "broadcast" and row["message"] is None  # built from the content
    assert parse(await message_of(api.parts.db, sent["id"]))["List-Unsubscribe"] is None


@pt.ensureDeferred
async def test_without_placeholders_and_with_html_only(api):
    _, key, _ = await sending_tenant(api, "signed.example.com")
    plain = {**BODY, "from": "news@signed.example.com", "stream": "broadcast",
             "to": ["ann@example.com", "bob@example.com"]}
    visible = {**plain, "html": "<p>Hi</p><p>Leave: {{{SVC_UNSUBSCRIBE_URL}}}</p>"}
    for body in (plain, visible):
        _, sent, _ = await api.json("POST", "/emails", key, json=body)
        generic = parse(await message_of(api.parts.db, sent["id"]))
        for raw in (await deliveries(api, sent["id"])).values():
            message = parse(raw)
            link = link_of(message)
            assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
            assert message["DKIM-Signature"] is None  # signed at delivery
            text = message.get_body(("plain",)).get_content()
            if body is plain:  # the email's body, byte for byte; only the header differs
                assert message.get_body(("html",)).get_content() == generic.get_body(("html",)).get_content()
                assert link not in text
            else:  # the text derived from the html carries the link too
                assert f"Leave: {link}" in text and link in message.get_body(("html",)).get_content()


@pt.ensureDeferred
async def test_the_page_changes_nothing_and_one_click_unsubscribes(api):
    _, key, _ = await sending_tenant(api)
    _, sent, _ = await api.json("POST", "/emails", key, json=BROADCAST)
    messages = await deliveries(api, sent["id"])
    path = path_of(api, link_of(parse(messages["ann@example.com"])))

    # GET (a person, or a link scanner): a page with a button that POSTs; nothing suppressed.
    for _ in range(2):
        response, page = await api.request("GET", path)
        assert response.code == 200
        assert response.headers.getRawHeaders("content-type") == ["text/html; charset=utf-8"]
        assert response.headers.getRawHeaders("cache-control") == ["no-store"]
        assert b'<form method="post">' in page and b"ann@example.com" in page
        assert b"news@acme.example.com" in page
    assert await api.parts.db.fetchall("SELECT * FROM suppressions") == []

    # The one-click POST a mailbox provider sends (RFC 8058 §3.2).
    response, done = await api.request(
        "POST", path, data=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.code == 200 and b"unsubscribed" in done
    code, record, _ = await api.json("GET", "/suppressions/ann@example.com", key)
    assert code == 200, record
    assert record["origin"] == "unsubscribe" and record["source_id"] == sent["id"]
    rows = await api.parts.db.fetchall("SELECT email FROM suppressions")
    assert [r["email"] for r in rows] == ["ann@example.com"]  # bob is untouched
    # Again: still one record, still 200; the page now says so.
    response, _ = await api.request("POST", path)
    assert response.code == 200
    assert len(await api.parts.db.fetchall("SELECT id FROM suppressions")) == 1
    _, page = await api.request("GET", path)
    assert b"You are unsubscribed" in page and b"<form" not in page

    # The next send to ann, on any stream, is suppressed; bob still gets a message with a link.
    for stream in ("broadcast", "transactional"):
        code, again, _ = await api.json("POST", "/emails", key, json={**BROADCAST, "stream": stream})
        assert code == 200
        suppressed = await api.parts.db.fetchall(
            "SELECT data FROM events WHERE type = 'email.suppressed' AND data->>'email_id' = %s", (again["id"],))
        assert [(e["data"]["recipient"], e["data"]["reason"]) for e in suppressed] == [
            ("ann@example.com", "unsubscribe")]
        messages = await deliveries(api, again["id"])
        assert messages["ann@example.com"] is None  # suppressed: no message of its own
        assert (messages["bob@example.com"] is not None) == (stream == "broadcast")


@pt.ensureDeferred
async def test_an_altered_or_foreign_link_is_refused(api):
    _, key, _ = await sending_tenant(api)
    _, sent, _ = await api.json("POST", "/emails", key, json=BROADCAST)
    path = path_of(api, link_of(parse((await deliveries(api, sent["id"]))["ann@example.com"])))
    token = path.rsplit("/", 1)[1]
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[33:36] = b"eve"  # another recipient, same MAC
    forged = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    foreign = Unsubscribes(None, None, b"another key" * 3).token(
        uuid.UUID(bytes=bytes(raw[1:17])), uuid.UUID(sent["id"]), "ann@example.com")
    for bad in (forged, token[:-2] + ("AA" if not token.endswith("AA") else "BB"), foreign, "x", "!!!!"):
        for method in ("GET", "POST"):
            response, body = await api.request(method, f"/public/unsubscribe/{bad}")
            assert response.code == 403, (bad, body)
            assert json.loads(body) == {"statusCode": 403, "name": "validation_error",
                                        "message": "This unsubscribe link is invalid."}
    assert await api.parts.db.fetchall("SELECT * FROM suppressions") == []


def test_a_token_reads_back_only_in_its_own_version():
    key, tenant_id, email_id = b"k" * 32, uuid.uuid4(), uuid.uuid4()
    links = Unsubscribes(None, None, key)
    token = links.token(tenant_id, email_id, "ännä@example.com")
    assert links.read(token) == Link(tenant_id, email_id, "ännä@example.com")
    # Signed with the right key, but a version this server does not know.
    unknown = signed_link(key, b"\x02" + tenant_id.bytes + email_id.bytes + b"ann@example.com")
    with pytest.raises(LinkRefused):
        links.read(unknown)
    with pytest.raises(ValueError):
        links.token(tenant_id, email_id, "a" * 513)


@pt.ensureDeferred
async def test_transactional_mail_carries_no_unsubscribe(api):
    _, key, _ = await sending_tenant(api)
    for body in (BODY, {**BODY, "stream": "transactional", "html": "<p>{{{SVC_UNSUBSCRIBE_URL}}}</p>"}):
        _, sent, _ = await api.json("POST", "/emails", key, json=body)
        message = parse(await message_of(api.parts.db, sent["id"]))
        assert message["List-Unsubscribe"] is None
        assert message["List-Unsubscribe-Post"] is None
        assert set((await deliveries(api, sent["id"])).values()) == {None}
    # A client's own List-Unsubscribe is kept on the transactional stream, refused on broadcast.
    own = {"List-Unsubscribe": "<mailto:leave@acme.example.com>"}
    code, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "headers": own})
    assert code == 200
    assert parse(await message_of(api.parts.db, sent["id"]))["List-Unsubscribe"] == "<mailto:leave@acme.example.com>"
    code, body, _ = await api.json("POST", "/emails", key, json={**BROADCAST, "headers": own})
    assert code == 422 and body["message"].startswith("headers")


@pt.ensureDeferred
async def test_batch_and_scheduled_broadcasts(api):
    _, key, _ = await sending_tenant(api)
    code, body, _ = await api.json("POST", "/emails/batch", key, json=[
        {**BROADCAST, "to": "one@example.com"}, {**BODY, "to": "two@example.com"},
        {**BROADCAST, "to": "three@example.com", "scheduled_at": "in 1 hour"}])
    assert code == 200
    ids = [d["id"] for d in body["data"]]
    one, two, three = [await deliveries(api, i) for i in ids]
    assert link_of(parse(one["one@example.com"])) != link_of(parse(three["three@example.com"]))
    assert two == {"two@example.com": None}


@pt.ensureDeferred
async def test_no_message_is_stored_however_many_recipients(api):
    """The per-recipient messages are built at delivery: a request to many stores its content once."""
    _, key, _ = await sending_tenant(api)
    to = [f"r{n}@example.com" for n in range(50)]
    code, sent, _ = await api.json("POST", "/emails", key, json={**BROADCAST, "to": to, "html": "<p>x</p>" * 5000})
    assert code == 200, sent
    row = await api.parts.db.fetchone(
        "SELECT e.message, e.html, count(d.message) AS own FROM emails e JOIN deliveries d ON d.email_id = e.id"
        " WHERE e.id = %s GROUP BY e.id", (sent["id"],))
    assert (row["message"], row["html"], row["own"]) == (None, "<p>x</p>" * 5000, 0)
    assert len(await deliveries(api, sent["id"])) == 50


class TestConfiguredPublicUrl:
    @pytest.fixture
    def config(self):
        return load(None, environ={"MAILSVC_HTTP_PUBLIC_URL": "https://mail.example.net/",
                                   "MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false"})

    @pt.ensureDeferred
    async def test_links_use_the_public_url(self, api):
        _, key, _ = await sending_tenant(api)
        _, sent, _ = await api.json("POST", "/emails", key, json=BROADCAST)
        link = link_of(parse((await deliveries(api, sent["id"]))["bob@example.com"]))
        assert link.startswith("https://mail.example.net/public/unsubscribe/")
        response, _ = await api.request("POST", link[len("https://mail.example.net"):])
        assert response.code == 200
