"""The return path end to end: mail delivered to the sink, then a DSN or a feedback report about
it sent by smtplib to the real inbound listener; the delivery bounces or is complained about,
with its event and suppression. Then the rules of which deliveries a DSN can be about (hostile
reports: tests/integration/test_hostile_returns.py)."""

import smtplib

import pytest
import pytest_twisted as pt
from twisted.internet import reactor, threads

from mailsvc.delivery import returns
from mailsvc.mail import reports
from mailsvc.smtp import inbound
from tests.helpers.reports import arf, dsn
from tests.helpers.returns import RETURN_HOST, delivered, port, sample, submit  # noqa: F401 (port: a fixture)


@pt.ensureDeferred
async def test_a_dsn_bounces_the_recipient_it_names(mta, port):  # noqa: F811 (the fixture)
    _, key = await mta.sender()
    email_id, return_path = await delivered(mta, key, ["ann@example.net", "nobody@example.net"])
    assert return_path.endswith("@" + RETURN_HOST)
    dsn = sample("postfix_hard_511.eml", **{
        "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example": return_path,
        "nobody@example.org": "nobody@example.net"})
    refused = await submit(port, "", [return_path], dsn)
    assert refused == {}
    statuses = {r["recipient"]: r["status"] for r in await mta.deliveries(email_id)}
    # The return path named the first recipient's delivery; the DSN picked its sibling.
    assert statuses == {"ann@example.net": "delivered", "nobody@example.net": "bounced"}
    (bounce,) = await mta.events("email.bounced")
    assert bounce["source"] == "dsn" and bounce["recipient"] == "nobody@example.net"
    assert (bounce["code"], bounce["enhanced_code"]) == (550, "5.1.1") and "User unknown" in bounce["message"]
    code, record, _ = await mta.json("GET", "/suppressions/nobody@example.net", key)
    assert code == 200 and record["origin"] == "hard_bounce" and record["source_id"] == email_id
    assert (await mta.json("GET", f"/emails/{email_id}", key))[1]["last_event"] == "bounced"


@pt.ensureDeferred
async def test_a_feedback_report_to_fbl_is_a_complaint(mta, port):  # noqa: F811 (the fixture)
    _, key = await mta.sender()
    email_id, return_path = await delivered(mta, key, ["reader@example.net"])
    (row,) = await mta.deliveries(email_id)
    arf = sample("yahoo_arf.eml", **{
        "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example": return_path,
        "reader@yahoo.com": "reader@example.net", "fbl@bounces.acme.example": f"fbl@{RETURN_HOST}"})
    await submit(port, "feedback@arf.mail.yahoo.com", [f"fbl@{RETURN_HOST}"], arf)
    (row,) = await mta.deliveries(email_id)
    assert row["status"] == "complained"
    (complaint,) = await mta.events("email.complained")
    assert complaint == {**complaint, "source": "fbl", "recipient": "reader@example.net", "email_id": email_id}
    code, record, _ = await mta.json("GET", "/suppressions/reader@example.net", key)
    assert record["origin"] == "complaint" and record["source_id"] == email_id
    assert (await mta.json("GET", f"/emails/{email_id}", key))[1]["last_event"] == "complained"


@pt.ensureDeferred
async def test_reports_about_mail_sent_through_the_smarthost_say_relay(start_mta_with, smtp_sink, tmp_path):
    ca_file = tmp_path / "sink.pem"
    ca_file.write_bytes(smtp_sink.cert_pem)
    mta = await start_mta_with(MAILSVC_DELIVERY_RELAY_HOST="localhost",
                               MAILSVC_DELIVERY_RELAY_PORT=str(smtp_sink.port), MAILSVC_SECURITY_CA_FILE=str(ca_file))
    tenant, key = await mta.sender()
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token, json={"delivery_mode": "relay"})
    email_id = await mta.send(key, ["ann@example.net", "carol@example.org"])
    await mta.settled_past(email_id)
    paths = {m.rcpt_to[0]: m.mail_from for m in mta.sink.messages}
    factory = inbound.InboundFactory(reactor, "mta.mailsvc.test", mta.parts.return_path.accepts,
                                     mta.parts.return_path.deliver)
    listening = await inbound.listen(reactor, "tcp:0:interface=127.0.0.1", factory)
    try:
        await submit(listening, "", [paths["ann@example.net"]], dsn(paths["ann@example.net"], "ann@example.net"))
        report = arf(f"fbl@{RETURN_HOST}", return_path=paths["carol@example.org"])
        await submit(listening, "", [f"fbl@{RETURN_HOST}"], report)
    finally:
        await listening.stopListening()
    (bounce,) = await mta.events("email.bounced")
    (complaint,) = await mta.events("email.complained")
    assert (bounce["recipient"], bounce["source"]) == ("ann@example.net", "relay")
    assert (complaint["recipient"], complaint["source"]) == ("carol@example.org", "relay")


@pt.ensureDeferred
async def test_the_return_path_is_no_open_relay(mta, port):  # noqa: F811 (the fixture)
    _, key = await mta.sender()
    _, return_path = await delivered(mta, key, ["ann@example.net"])
    forged = return_path.replace("b-", "b-a", 1)[:len(return_path)]

    def refused(rcpt):
        with smtplib.SMTP("127.0.0.1", port.getHost().port, timeout=10) as client:
            client.ehlo("peer.example")
            client.mail("")
            return client.rcpt(rcpt)

    for rcpt in ("someone@example.net", f"news@{RETURN_HOST}", forged, "postmaster@example.net"):
        code, text = await threads.deferToThread(refused, rcpt)
        assert (code, text[:5]) == (550, b"5.7.1"), rcpt
    for rcpt in (return_path, return_path.upper(), f"postmaster@{RETURN_HOST}"):
        code, _ = await threads.deferToThread(refused, rcpt)
        assert code == 250, rcpt
    # An auto-reply to the return path is taken and dropped: nothing changes.
    await submit(port, "ann@example.net", [return_path], sample("auto_reply.eml"))
    assert await mta.events("email.bounced") == [] and await mta.events("email.complained") == []


# Which deliveries a DSN sent to one VERP address can bounce (pure rules, a table each)

ANN, BOB, CAROL, OWN = (
    {"id": n, "recipient": r, "own_message": own}
    for n, r, own in ((1, "ann@example.net", False), (2, "Bob@Example.NET", False), (3, "carol@example.org", False),
                      (4, "dan@example.net", True)))


def failure(address: str | None, original: str | None = None) -> reports.DsnRecipient:
    return reports.DsnRecipient(final_recipient=address, original_recipient=original, action="failed", status="5.1.1")


@pytest.mark.parametrize(("named", "deliveries", "shared"), [
    (ANN, [ANN, BOB, CAROL, OWN], [ANN, BOB]),  # one recipient domain, one transaction
    (CAROL, [ANN, BOB, CAROL, OWN], [CAROL]),
    (OWN, [ANN, BOB, CAROL, OWN], [OWN]),  # a message of its own went alone
    (BOB, [BOB], [BOB]),
])
def test_shared_return_path(named, deliveries, shared):
    assert returns.shared_return_path(named, deliveries) == shared


@pytest.mark.parametrize(("named", "deliveries", "failures", "bounced"), [
    (ANN, [ANN, BOB, CAROL], [failure("bob@example.net")], [BOB]),
    (ANN, [ANN, BOB, CAROL], [failure("x@y", original="ANN@example.net")], [ANN]),
    # A co-recipient at another domain had a return path of its own.
    (ANN, [ANN, BOB, CAROL], [failure("carol@example.org")], []),
    (ANN, [ANN, CAROL], [failure("carol@example.org")], []),
    # An address never sent to: the named delivery, when it went out alone and the failure is the only one.
    (ANN, [ANN, CAROL], [failure("ann@forwarded.example")], [ANN]),
    (ANN, [ANN, CAROL], [failure(None)], [ANN]),
    (ANN, [ANN, BOB], [failure("ann@forwarded.example")], []),
    (ANN, [ANN, CAROL], [failure("ann@forwarded.example"), failure("x@forwarded.example")], []),
    (OWN, [ANN, BOB, OWN], [failure("ann@example.net")], []),
    (ANN, [ANN, BOB, CAROL], [failure("ann@example.net"), failure("bob@example.net"), failure("carol@example.org")],
     [ANN, BOB]),
])
def test_bounced(named, deliveries, failures, bounced):
    assert [row for row, _ in returns.bounced(named, deliveries, tuple(failures))] == bounced


# Which delivery a feedback report is about, among those it was proven to be about (a table)

def feedback(rcpt_to=(), delivered_to=(), to=(), cc=()) -> reports.FeedbackReport:
    return reports.FeedbackReport("abuse", original_rcpt_to=rcpt_to, original_delivered_to=delivered_to,
                                  original_to=to, original_cc=cc)


@pytest.mark.parametrize(("candidates", "report", "found"), [
    ([ANN], feedback(), ANN),  # the only one, whatever the report says
    ([ANN], feedback(rcpt_to=("bob@example.net",)), ANN),
    ([ANN, BOB], feedback(rcpt_to=("BOB@example.net",)), BOB),
    ([ANN, BOB], feedback(), None),
    ([ANN, BOB], feedback(rcpt_to=("ann@example.net", "bob@example.net")), None),  # names both: cannot tell
    # Original-Rcpt-To missing, or naming none of them (redacted): the original's headers.
    ([ANN, BOB], feedback(delivered_to=("ann@example.net",), to=("ann@example.net", "bob@example.net")), ANN),
    ([ANN, BOB], feedback(rcpt_to=("redacted@example.net",), to=("Bob@Example.net",)), BOB),
    ([ANN, BOB, CAROL], feedback(to=("team@example.net",), cc=("carol@example.org",)), CAROL),
    ([ANN, BOB], feedback(to=("ann@example.net", "bob@example.net")), None),
    ([ANN, BOB], feedback(rcpt_to=("ann@example.net",), to=("bob@example.net",)), ANN),  # the envelope first
    ([], feedback(rcpt_to=("ann@example.net",)), None),
])
def test_complained(candidates, report, found):
    assert returns.complained(candidates, report) == found
