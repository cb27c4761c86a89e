"""
Hostile input on the return path: reports sent by smtplib, as any peer on the internet can, to
the real inbound listener of a running service whose mail went to the sink. Each case checks
the SMTP reply and what was written: no bounce, complaint or suppression for anyone the report
cannot prove it is about, and the right one in the honest case beside it.
"""

from __future__ import annotations

import smtplib
import uuid

import pytest
import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc.mail import reports, verp
from mailsvc.smtp import inbound
from mailsvc.store import returns as return_queries
from tests.helpers.mta import DOMAIN
from tests.helpers.reports import arf, dsn
from tests.helpers.sending import sending_tenant

HOST = f"bounces.{DOMAIN}"
OTHER_DOMAIN = "other.example.com"


@pt.async_yield_fixture
async def port(mta):
    factory = inbound.InboundFactory(reactor, "mta.mailsvc.test", mta.parts.return_path.accepts,
                                     mta.parts.return_path.deliver)
    listening = await inbound.listen(reactor, "tcp:0:interface=127.0.0.1", factory)
    yield listening.getHost().port
    await listening.stopListening()


async def sent(mta, key: str, to: list[str], **fields) -> tuple[str, dict[str, str]]:
    """Sends ``to`` through the sink; the email's id and the return path each recipient got."""
    for domain in {a.rpartition("@")[2] for a in to}:
        mta.route(domain)
    before = len(mta.sink.messages)
    email_id = await mta.send(key, to, **fields)
    await mta.settled_past(email_id)
    return email_id, {r: m.mail_from for m in mta.sink.messages[before:] for r in m.rcpt_to}


async def message_id_of(mta, email_id: str) -> str:
    return (await mta.parts.db.fetchone("SELECT message_id FROM emails WHERE id = %s", (email_id,)))["message_id"]


async def written(mta) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(event type, recipient) of every bounce and complaint, and (address, origin) of every suppression."""
    events = await mta.parts.db.fetchall(
        "SELECT type, data->>'recipient' AS recipient FROM events"
        " WHERE type IN ('email.bounced', 'email.complained') ORDER BY id")
    suppressions = await mta.parts.db.fetchall("SELECT email, origin FROM suppressions ORDER BY email")
    return [(e["type"], e["recipient"]) for e in events], [(s["email"], s["origin"]) for s in suppressions]


def deliver(port: int, recipients: list[str], body: bytes, sender: str = "") -> tuple:
    """One session as an MTA returning a report holds it: ("ok", refused), ("refused", replies),
    ("sender", reply) or ("data", reply)."""
    with smtplib.SMTP("127.0.0.1", port, local_hostname="mx.example.net", timeout=30) as client:
        try:
            return "ok", client.sendmail(sender, recipients, body)
        except smtplib.SMTPRecipientsRefused as e:
            return "refused", e.recipients
        except smtplib.SMTPSenderRefused as e:
            return "sender", (e.smtp_code, e.smtp_error[:5])
        except smtplib.SMTPDataError as e:
            return "data", (e.smtp_code, e.smtp_error[:5])


def deliver_without_size(port: int, recipient: str, body: bytes) -> tuple[int, bytes]:
    """A peer that does not declare the size: the reply to the end of its data."""
    with smtplib.SMTP("127.0.0.1", port, local_hostname="mx.example.net", timeout=30) as client:
        client.ehlo()
        client.mail("")
        client.rcpt(recipient)
        code, text = client.data(body)
        return code, text[:5]


async def send_report(port: int, recipients: list[str], body: bytes, sender: str = "") -> tuple:
    return await threads.deferToThread(deliver, port, recipients, body, sender)


@pt.ensureDeferred
async def test_a_dsn_naming_a_co_recipient_at_another_domain_touches_nobody(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net", "carol@example.org"])
    assert paths["ann@example.net"] != paths["carol@example.org"]
    # Sent to ann's return path, about carol: carol's mail had a return path of its own.
    assert await send_report(port, [paths["ann@example.net"]], dsn(paths["ann@example.net"], "carol@example.org")) \
        == ("ok", {})
    assert await written(mta) == ([], [])
    # The honest DSN, to carol's return path.
    await send_report(port, [paths["carol@example.org"]], dsn(paths["carol@example.org"], "carol@example.org"))
    assert await written(mta) == ([("email.bounced", "carol@example.org")], [("carol@example.org", "hard_bounce")])


@pt.ensureDeferred
async def test_a_dsn_with_many_blocks_bounces_only_the_recipients_of_its_transaction(mta, port):
    _, key = await mta.sender()
    to = ["ann@example.net", "bob@example.net", "carol@example.org"]
    _, paths = await sent(mta, key, to)
    assert paths["ann@example.net"] == paths["bob@example.net"]  # one transaction per domain
    shared = paths["ann@example.net"]
    assert await send_report(port, [shared], dsn(shared, *to, "stranger@example.net")) == ("ok", {})
    events, suppressed = await written(mta)
    assert sorted(events) == [("email.bounced", "ann@example.net"), ("email.bounced", "bob@example.net")]
    assert suppressed == [("ann@example.net", "hard_bounce"), ("bob@example.net", "hard_bounce")]


@pt.ensureDeferred
async def test_a_dsn_for_an_address_not_in_the_delivery(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net", "bob@example.net"])
    shared = paths["ann@example.net"]
    # Two recipients went out under this return path: a stranger's failure is neither of theirs.
    assert await send_report(port, [shared], dsn(shared, "stranger@example.net")) == ("ok", {})
    assert await written(mta) == ([], [])
    # Alone in its transaction, a delivery forwarded on the way is the one the failure is about.
    _, paths = await sent(mta, key, ["dave@example.com"])
    alone = paths["dave@example.com"]
    await send_report(port, [alone], dsn(alone, "dave.forwarded@elsewhere.example"))
    assert await written(mta) == ([("email.bounced", "dave@example.com")], [("dave@example.com", "hard_bounce")])


@pt.ensureDeferred
async def test_a_feedback_report_with_a_forged_original_rcpt_to(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net", "carol@example.org"])
    # The report proves (VERP) it is about ann's mail and claims it is carol's complaint.
    report = arf(f"fbl@{HOST}", return_path=paths["ann@example.net"], rcpt_to="carol@example.org")
    assert await send_report(port, [f"fbl@{HOST}"], report, "feedback@fbl.example.net") == ("ok", {})
    assert await written(mta) == ([("email.complained", "ann@example.net")], [("ann@example.net", "complaint")])


@pt.ensureDeferred
async def test_a_feedback_report_that_cannot_tell_which_recipient_is_dropped(mta, port):
    _, key = await mta.sender()
    email_id, paths = await sent(mta, key, ["ann@example.net", "bob@example.net"])
    shared = paths["ann@example.net"]
    # Both went out under one return path and one Message-ID: a report naming neither, or a
    # stranger, cannot tell which one complained.
    for report in (arf(f"fbl@{HOST}", return_path=shared),
                   arf(f"fbl@{HOST}", message_id=await message_id_of(mta, email_id), rcpt_to="eve@example.net")):
        assert await send_report(port, [f"fbl@{HOST}"], report) == ("ok", {})
    assert await written(mta) == ([], [])


@pytest.mark.parametrize("count", [2, 50])
@pt.ensureDeferred
async def test_a_feedback_report_about_one_of_several_recipients_of_a_transaction(mta, port, count):
    _, key = await mta.sender()
    to = [f"r{i}@example.net" for i in range(count)]
    email_id, paths = await sent(mta, key, to)
    assert len(set(paths.values())) == 1  # one SMTP transaction
    complainer = to[-1]
    # Original-Rcpt-To names the one who complained among those the report proves it is about.
    report = arf(f"fbl@{HOST}", return_path=paths[complainer], rcpt_to=complainer)
    assert await send_report(port, [f"fbl@{HOST}"], report) == ("ok", {})
    assert await written(mta) == ([("email.complained", complainer)], [(complainer, "complaint")])
    # Without it, by our Message-ID: the enclosed original's recipient headers name the one.
    report = arf(f"abuse@{HOST}", message_id=await message_id_of(mta, email_id), delivered_to=to[0])
    assert await send_report(port, [f"abuse@{HOST}"], report) == ("ok", {})
    assert await written(mta) == ([("email.complained", complainer), ("email.complained", to[0])],
                                  sorted([(complainer, "complaint"), (to[0], "complaint")]))


@pt.ensureDeferred
async def test_a_feedback_report_naming_another_tenants_message_id(mta, port):
    _, key = await mta.sender()
    other, other_key, _ = await sending_tenant(mta, OTHER_DOMAIN)
    await mta.json("PATCH", f"/admin/v1/tenants/{other['id']}", mta.operator_token, json={"send_rate_per_sec": 1000})
    theirs, _ = await sent(mta, other_key, ["victim@example.net"], **{"from": f"News <news@{OTHER_DOMAIN}>"})
    ours, _ = await sent(mta, key, ["reader@example.net"])
    # To our return-path host, naming their Message-ID (and the other way round): nothing.
    for to, email_id in ((f"abuse@{HOST}", theirs), (f"abuse@bounces.{OTHER_DOMAIN}", ours)):
        assert await send_report(port, [to], arf(to, message_id=await message_id_of(mta, email_id))) == ("ok", {})
    assert await written(mta) == ([], [])
    # Our own Message-ID at our own host: our one recipient complained.
    await send_report(port, [f"abuse@{HOST}"], arf(f"abuse@{HOST}", message_id=await message_id_of(mta, ours)))
    assert await written(mta) == ([("email.complained", "reader@example.net")], [("reader@example.net", "complaint")])


@pt.ensureDeferred
async def test_a_verp_address_with_a_bad_mac_or_an_unknown_delivery(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net"])
    real = paths["ann@example.net"]
    local = real.split("@")[0]
    forged = local[:-1] + ("a" if local[-1] != "a" else "b") + "@" + HOST
    result = await send_report(port, [forged], dsn(forged, "ann@example.net"))
    assert result == ("refused", {forged: (550, b"5.7.1 Relay not permitted")})
    # A well-made address of a delivery that does not exist (deleted, or never ours) is taken and dropped.
    unknown = verp.envelope_sender(mta.verp_key, uuid.uuid4(), HOST)
    assert await send_report(port, [unknown], dsn(unknown, "ann@example.net")) == ("ok", {})
    assert await send_report(port, [f"postmaster@{HOST}"], dsn(f"postmaster@{HOST}", "ann@example.net")) == ("ok", {})
    assert await written(mta) == ([], [])


@pt.ensureDeferred
async def test_duplicated_dsns_bounce_once(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net"])
    path = paths["ann@example.net"]
    twice = dsn(path, "ann@example.net", "ANN@example.net")
    # The same recipient twice in the envelope, twice in the report, and the report sent again.
    assert await send_report(port, [path, path.upper()], twice) == ("ok", {})
    assert await send_report(port, [path], twice) == ("ok", {})
    assert await written(mta) == ([("email.bounced", "ann@example.net")], [("ann@example.net", "hard_bounce")])
    (row,) = await mta.parts.db.fetchall("SELECT bounced FROM delivery_stats")
    assert row["bounced"] == 1


@pt.ensureDeferred
async def test_an_oversized_report_is_refused_and_a_large_one_is_read_from_its_head(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net", "zoe@example.com"])
    ann, zoe = paths["ann@example.net"], paths["zoe@example.com"]
    filler = ("X-Filler: " + "x" * 990 + "\r\n") * 10_600  # about 10.6 MB of returned original
    oversized = dsn(ann, "ann@example.net", original=filler)
    assert len(oversized) > inbound.MAX_MESSAGE_BYTES
    # Declared (smtplib sends SIZE=), it is refused at MAIL; undeclared, at the end of DATA.
    assert await send_report(port, [ann], oversized) == ("sender", (552, b"5.3.4"))
    assert await threads.deferToThread(deliver_without_size, port, ann, oversized) == (552, b"5.3.4")
    assert await written(mta) == ([], [])
    # Within the limit but far beyond what is read: the report is found in its head.
    large = dsn(zoe, "zoe@example.com", original=filler[:len(filler) // 2])
    assert len(large) > 5_000_000 and await send_report(port, [zoe], large) == ("ok", {})
    assert await written(mta) == ([("email.bounced", "zoe@example.com")], [("zoe@example.com", "hard_bounce")])


@pt.ensureDeferred
async def test_malformed_mime_is_taken_and_dropped(mta, port):
    _, key = await mta.sender()
    _, paths = await sent(mta, key, ["ann@example.net"])
    path = paths["ann@example.net"]
    honest = dsn(path, "ann@example.net")
    nested = b"".join(b"Content-Type: multipart/mixed; boundary=n%d\r\n\r\n--n%d\r\n" % (i, i) for i in range(5000))
    bodies = [
        honest[:honest.index(b"Final-Recipient")],  # cut before its recipients
        honest.replace(b'boundary="b"', b'boundary="nothing-here"'),
        honest.replace(b"message/delivery-status", b"text/plain"),
        b"Content-Type: multipart/report; report-type=delivery-status\r\n\r\n--\r\n--\r\n",
        b"\x00\xff\xfe binary \x80\r\n" * 100,
        nested,
        honest.replace(b"Action: failed", b"Action: delayed"),
    ]
    for body in bodies:
        assert await send_report(port, [path], body) == ("ok", {}), body[:80]
    assert await written(mta) == ([], [])
    await send_report(port, [path], honest)
    assert await written(mta) == ([("email.bounced", "ann@example.net")], [("ann@example.net", "hard_bounce")])


def recipients_over_the_limit(port: int, addresses: list[str]) -> list[tuple[int, bytes]]:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        client.ehlo("mx.example.net")
        client.mail("")
        return [client.rcpt(address) for address in addresses]


def connections_over_the_limit(port: int) -> tuple[int, bytes]:
    held = [smtplib.SMTP("127.0.0.1", port, timeout=30) for _ in range(inbound.MAX_CONNECTIONS_PER_PEER)]
    try:
        try:
            smtplib.SMTP("127.0.0.1", port, timeout=30)
        except smtplib.SMTPConnectError as e:
            return e.smtp_code, e.smtp_error
        raise AssertionError("a connection over the limit was taken")
    finally:
        for client in held:
            client.quit()


@pt.ensureDeferred
async def test_a_peer_is_bounded_in_recipients_and_connections(mta, port):
    await mta.sender()  # HOST becomes a return-path host
    # Well-made VERP addresses, each one taken, up to the limit.
    addresses = [verp.envelope_sender(mta.verp_key, uuid.uuid4(), HOST) for _ in range(inbound.MAX_RECIPIENTS + 1)]
    replies = await threads.deferToThread(recipients_over_the_limit, port, addresses)
    assert [code for code, _ in replies[:-1]] == [250] * inbound.MAX_RECIPIENTS
    assert replies[-1] == (452, b"4.5.3 Too many recipients (at most 10)")
    code, text = await threads.deferToThread(connections_over_the_limit, port)
    assert code == 421 and b"Too many connections" in text
    # The held connections are gone: a new session is served (and its non-report dropped).
    assert await send_report(port, [f"postmaster@{HOST}"], b"Subject: x\r\n\r\nx\r\n") == ("ok", {})
    assert await written(mta) == ([], [])


def plan_of(explained) -> list[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    nodes, stack = [], [explained[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


@pt.ensureDeferred
async def test_the_lookups_a_peer_causes_use_indexes(db):
    """The real statements, planned with sequential scans priced out: each reaches its rows by index."""

    async def explain(txn, sql, args):
        await txn.execute("SET LOCAL enable_seqscan = off")
        (row,) = await txn.fetchall("EXPLAIN (FORMAT JSON) " + sql, args)
        return plan_of(row["QUERY PLAN"])

    cases = [
        (return_queries.RETURN_PATH_HOST, (HOST,), {"domains_return_path_host"}),
        (return_queries.DELIVERIES_OF_THE_EMAIL_OF, (uuid.uuid4(),), {"deliveries_pkey", "deliveries_email"}),
        (return_queries.DELIVERIES_BY_MESSAGE_ID, ("<x@acme>", HOST),
         {"domains_return_path_host", "emails_message_id", "deliveries_email"}),
        (return_queries.RELAYED, ([str(uuid.uuid4())], [str(uuid.uuid4())]), {"events_email"}),
    ]
    for sql, args, indexes in cases:
        nodes = await db.run("explain", explain, sql, args)
        assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], (sql, nodes)
        assert indexes <= {n["Index Name"] for n in nodes if "Index Name" in n}, (sql, nodes)


def test_the_parser_reads_a_bounded_head():
    honest = dsn("x@y", "ann@example.net")
    assert reports.parse(honest + b"--b\r\n" * 10_000) == reports.parse(honest)
    assert reports.parse(b"X-Filler: y\r\n" * 20_000 + honest) is None  # its report lies beyond the head
