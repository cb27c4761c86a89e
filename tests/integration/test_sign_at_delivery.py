"""
DKIM signing at delivery: a message is stored unsigned and signed by the delivery worker right
before its transaction, with the sending domain's keys of that moment. dkimpy verifies what the
sink received, through the loopback DNS server, on every path: direct, relay, a retry after a
4xx, scheduled mail, a key rotated between acceptance and delivery, the broadcast stream and
SMTP-submitted mail with its own headers.
"""

import base64
import email
import email.policy
import re
import smtplib
import uuid

import pytest
import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc import listeners
from mailsvc.app.domains import SigningKeys
from mailsvc.crypto import credentials, tls
from mailsvc.mail import dkim
from tests.helpers.mta import DOMAIN
from tests.helpers.sending import message_of
from tests.helpers.signing import signatures, signing_sender, verdicts
from tests.helpers.smtp import message, submit, tls_context
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)


def selectors(raw: bytes) -> set[str]:
    return {re.search(r"(?:^|;)s=([^;]+)", s).group(1) for s in signatures(raw)}


async def stored(mta, email_id: str) -> dict:
    """Whether the e-mail is stored signed, and its message as built (or stored) before signing."""
    row = await mta.parts.db.fetchone("SELECT signed FROM emails WHERE id = %s", (email_id,))
    return {**row, "message": await message_of(mta.parts.db, email_id)}


async def release(mta, email_id: str) -> None:
    """A scheduled email's time has come: the scheduler releases it."""
    await mta.parts.db.execute("UPDATE emails SET scheduled_at = now() - interval '1 second' WHERE id = %s",
                               (email_id,))
    assert await mta.parts.emails.release_due() == 1


async def rotate(mta, domain_id: str) -> set[str]:
    """The domain's keys replaced by new ones (new selectors, published), sealed as the node seals."""
    keys = SigningKeys(credentials.vault(mta.master, (), "dkim-keys"))  # as every node of this master opens them
    await mta.parts.db.execute("DELETE FROM dkim_keys WHERE domain_id = %s", (domain_id,))
    new = set()
    for algorithm, k in ((dkim.RSA, "rsa"), (dkim.ED25519, "ed25519")):
        pair = dkim.generate(f"rotated-{k}", algorithm)
        key_id = uuid.uuid4()
        await mta.parts.db.execute(
            "INSERT INTO dkim_keys (id, domain_id, selector, algorithm, public_key, private_key, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, now())",
            (key_id, domain_id, pair.selector, algorithm, pair.public_key, keys.seal(key_id, pair.private_der)))
        mta.dns.txt(f"{pair.selector}._domainkey.{DOMAIN}", f"v=DKIM1; k={k}; p={pair.public_key}")
        new.add(pair.selector)
    return new


@pt.ensureDeferred
async def test_direct_mail_is_stored_unsigned_and_verifies_at_the_sink(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"], subject="Grüße", text="line\n.dot\n", attachments=[
        {"filename": "a.bin", "content": base64.b64encode(bytes(range(256))).decode()}])
    row = await stored(mta, email_id)
    assert row["signed"] is False and b"DKIM-Signature" not in bytes(row["message"])
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert len(signatures(received.data)) == 2
    assert await verdicts(mta, received.data) == [True, True]
    assert b"\r\n..dot\r\n" not in received.data  # dot-stuffing undone by the sink
    tampered = received.data.replace(b".dot", b".dit", 1)
    assert await verdicts(mta, tampered) == [False, False]


@pt.ensureDeferred
async def test_relay_mail_verifies(start_mta_with, smtp_sink, tmp_path):  # noqa: F811
    ca_file = tmp_path / "sink.pem"
    ca_file.write_bytes(smtp_sink.cert_pem)
    mta = await start_mta_with(
        MAILSVC_DELIVERY_RELAY_HOST="localhost", MAILSVC_DELIVERY_RELAY_PORT=str(smtp_sink.port),
        MAILSVC_DELIVERY_RELAY_USERNAME="relay-user", MAILSVC_DELIVERY_RELAY_PASSWORD="relay-secret",
        MAILSVC_SECURITY_CA_FILE=str(ca_file),
    )
    mta.sink.require_auth = True
    tenant, key, _ = await signing_sender(mta)
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token, json={"delivery_mode": "relay"})
    email_id = await mta.send(key, ["ann@example.net"])
    assert [r["status"] for r in await mta.settled_past(email_id)] == ["delivered"]
    (received,) = mta.sink.messages
    assert received.auth_user == "relay-user"
    assert await verdicts(mta, received.data) == [True, True]


@pt.ensureDeferred
async def test_a_retry_after_a_4xx_verifies(mta):
    mta.route("example.net")
    mta.sink.rcpt_replies["ann@example.net"] = b"451 4.7.1 greylisted, try again later"
    _, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred"
    del mta.sink.rcpt_replies["ann@example.net"]
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE id = %s", (row["id"],))
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert await verdicts(mta, received.data) == [True, True]
    assert [r["attempts"] for r in await mta.deliveries(email_id)] == [2]


def unsigned(raw: bytes) -> bytes:
    """A message without its DKIM-Signature fields (their ``t=`` is the time of signing)."""
    return re.sub(rb"\ADKIM-Signature:.*?\r\n(?=[^ \t])", b"", re.sub(
        rb"\ADKIM-Signature:.*?\r\n(?=[^ \t])", b"", raw, flags=re.S), flags=re.S)


@pt.ensureDeferred
async def test_a_retry_sends_the_same_message(mta):
    """Built from the stored content at each attempt, the message is the same bytes every time:
    its Message-ID, Date and MIME boundaries too; only the signatures' times differ."""
    mta.route("example.net")
    mta.sink.data_reply = b"451 4.3.0 try again later"
    _, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"], text="Hi Ann", attachments=[
        {"filename": "a.bin", "content": base64.b64encode(bytes(range(256))).decode()}])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred"
    mta.sink.data_reply = None
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE id = %s", (row["id"],))
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    (first,), (second,) = mta.sink.refused, mta.sink.messages
    assert unsigned(first.data) == unsigned(second.data) == await message_of(mta.parts.db, email_id)
    assert re.search(rb'boundary="', second.data)  # multipart: its boundaries were the same
    assert await verdicts(mta, first.data) == await verdicts(mta, second.data) == [True, True]


@pt.ensureDeferred
async def test_scheduled_mail_verifies(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"], scheduled_at="in 1 min")
    await release(mta, email_id)
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert await verdicts(mta, received.data) == [True, True]


@pt.ensureDeferred
async def test_a_key_rotated_after_acceptance_signs_the_mail_not_yet_sent(mta):
    mta.route("example.net")
    _, key, domain_id = await signing_sender(mta)
    mta.sink.rcpt_replies["warm@example.net"] = b"550 5.1.1 no"  # the node opens today's keys once
    await mta.settled_past(await mta.send(key, ["warm@example.net"]))
    email_id = await mta.send(key, ["ann@example.net"], scheduled_at="in 1 min")
    new = await rotate(mta, domain_id)
    await release(mta, email_id)
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert selectors(received.data) == new
    assert await verdicts(mta, received.data) == [True, True]


@pt.ensureDeferred
async def test_broadcast_messages_are_signed_at_delivery_over_their_unsubscribe_headers(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net", "bob@example.net"], stream="broadcast",
                              html='<p>News</p><a href="{{{SVC_UNSUBSCRIBE_URL}}}">Unsubscribe</a>')
    own = await mta.parts.db.fetchall("SELECT message FROM deliveries WHERE email_id = %s", (email_id,))
    assert [r["message"] for r in own] == [None, None]  # each built at delivery
    await mta.sink.wait_for(2)
    await mta.settled()
    links = set()
    for received in mta.sink.messages:  # one transaction per recipient, each its own message
        parsed = email.message_from_bytes(received.data, policy=email.policy.default)
        links.add(parsed["List-Unsubscribe"])
        for signature in signatures(received.data):
            h = re.search(r"h=([^;]*);", signature).group(1).split(":")
            assert "list-unsubscribe" in h and "list-unsubscribe-post" in h
        assert await verdicts(mta, received.data) == [True, True]
    assert len(links) == 2


@pytest.fixture
def pem():
    return tls.self_signed("mx.test")


@pt.ensureDeferred
async def test_smtp_submitted_mail_with_its_own_headers_verifies(mta, pem):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    port = await listeners.listen_submission(reactor, "ssl:0:interface=127.0.0.1", mta.parts.submission,
                                           tls.server_options(*pem))
    try:
        # A client's own headers travel; its DKIM-Signature does not (we sign, once).
        msg = message(To="ann@example.net", X_Entity_Ref_ID="own-header", Reply_To="desk@acme.example.com",
                      DKIM_Signature="v=1; a=rsa-sha256; d=acme.example.com; s=forged; b=AAAA")
        await threads.deferToThread(submit, port.getHost().port, pem, key, msg, True)
    finally:
        await port.stopListening()
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    parsed = email.message_from_bytes(received.data, policy=email.policy.default)
    assert parsed["X-Entity-Ref-ID"] == "own-header" and parsed["Reply-To"] == "desk@acme.example.com"
    assert len(signatures(received.data)) == 2 and "forged" not in str(parsed.get_all("DKIM-Signature"))
    assert await verdicts(mta, received.data) == [True, True]


def submit_raw(port: int, pem, key: str, raw: bytes, recipients: list[str]) -> None:
    client = smtplib.SMTP_SSL("127.0.0.1", port, context=tls_context(pem), timeout=10)
    try:
        client.login("mailsvc", key)
        client.sendmail(f"news@{DOMAIN}", recipients, raw)
    finally:
        client.quit()


@pt.ensureDeferred
async def test_the_from_delivered_is_the_from_checked(mta, pem):
    # Folded fields, a Sender: what the intake read is what the sink receives, signed; the
    # email package's strict policy (which raises on a line it cannot read) and its default
    # policy read the same From and Sender (the fuzz is in test_mime_fast_intake).
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    raw = (f"From: News\r\n <news@{DOMAIN}>\r\nSender: Desk\r\n\t<desk@{DOMAIN}>\r\nTo: ann@example.net\r\n"
           "X-Junk: y\r\nSubject: checked\r\n\r\nbody\r\n").encode()
    port = await listeners.listen_submission(reactor, "ssl:0:interface=127.0.0.1", mta.parts.submission,
                                           tls.server_options(*pem))
    try:
        await threads.deferToThread(submit_raw, port.getHost().port, pem, key, raw, ["ann@example.net"])
    finally:
        await port.stopListening()
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    for policy in (email.policy.strict, email.policy.default):
        parsed = email.message_from_bytes(received.data, policy=policy)
        assert [str(f) for f in parsed.get_all("From")] == [f"News <news@{DOMAIN}>"]
        assert [str(f) for f in parsed.get_all("Sender")] == [f"Desk <desk@{DOMAIN}>"]
    assert all(re.search(r"h=from:from:sender:sender:", s) for s in signatures(received.data))
    assert await verdicts(mta, received.data) == [True, True]


@pt.ensureDeferred
async def test_mail_stored_signed_by_an_older_version_is_not_signed_again(mta):
    mta.route("example.net")
    tenant, key, _ = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"], scheduled_at="in 1 min")
    # As the accept path stored it before signing moved to delivery.
    domain = await mta.parts.domains.lookup_sending_domain(uuid.UUID(tenant["id"]), DOMAIN)
    unsigned = bytes((await stored(mta, email_id))["message"])
    old = dkim.sign(unsigned, DOMAIN, domain.signers, timestamp=1_795_000_000) + unsigned
    await mta.parts.db.execute("UPDATE emails SET message = %s, signed = true WHERE id = %s", (old, email_id))
    await release(mta, email_id)
    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert received.data.replace(b"\r\n", b"\n") == old.replace(b"\r\n", b"\n")
    assert await verdicts(mta, received.data) == [True, True]


@pt.ensureDeferred
async def test_a_message_is_signed_once_for_all_of_its_transactions_in_a_step(mta, monkeypatch):
    for domain in ("example.net", "example.org", "example.com"):
        mta.route(domain)
    _, key, _ = await signing_sender(mta)
    signed = []
    sign = dkim.sign
    monkeypatch.setattr(dkim, "sign", lambda *a, **kw: signed.append(a[1]) or sign(*a, **kw))
    # Three domains: three transactions, one claim, one signature.
    email_id = await mta.send(key, ["ann@example.net", "bob@example.net", "carl@example.org"], bcc="dan@example.com")
    assert {r["status"] for r in await mta.settled_past(email_id)} == {"delivered"}
    assert len(mta.sink.messages) == 3 and len({m.data for m in mta.sink.messages}) == 1
    assert signed == [DOMAIN]
    assert await verdicts(mta, mta.sink.messages[0].data) == [True, True]


@pt.ensureDeferred
async def test_a_domain_without_keys_at_delivery_fails_as_deleted(mta):
    mta.route("example.net")
    _, key, domain_id = await signing_sender(mta)
    email_id = await mta.send(key, ["ann@example.net"], scheduled_at="in 1 min")
    await mta.parts.db.execute("DELETE FROM dkim_keys WHERE domain_id = %s", (domain_id,))
    await release(mta, email_id)
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "failed" and mta.sink.messages == []
    (failed,) = await mta.events("email.failed")
    assert failed["reason"] == "content_expired"

