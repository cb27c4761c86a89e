"""Delivery status notifications and feedback reports, parsed from samples in the formats real MTAs send."""

import random
from pathlib import Path

import pytest

from mailsvc.mail import reports
from mailsvc.mail.reports import DeliveryReport, DsnRecipient, FeedbackReport

SAMPLES = Path(__file__).parent.parent / "samples"
VERP = "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example"


def sample(name: str, crlf: bool = False) -> bytes:
    data = (SAMPLES / name).read_bytes()
    return data.replace(b"\n", b"\r\n") if crlf else data


def both_endings(name: str):
    """The sample as stored (bare LF) and as it arrives over SMTP (CRLF): both parse alike."""
    lf, crlf = reports.parse(sample(name)), reports.parse(sample(name, crlf=True))
    assert lf == crlf
    return lf


def test_postfix_hard_bounce():
    report = both_endings("postfix_hard_511.eml")
    assert report == DeliveryReport(
        reporting_mta="mx1.example.org",
        original_envelope_id=None,
        recipients=(DsnRecipient(
            final_recipient="nobody@example.org",
            original_recipient="nobody@example.org",
            action="failed",
            status="5.1.1",
            # Folded over two lines in the report.
            diagnostic_code="550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown",
            diagnostic_type="smtp",
            remote_mta="mail.example.org",
        ),),
        original_message_id="<0190c9a4-7b1e-7c3d-9f00-2a1b3c4d5e6f@acme.example>",
    )
    rcpt = report.recipients[0]
    assert rcpt.smtp_code == 550 and rcpt.enhanced_code == "5.1.1" and rcpt.is_permanent
    assert report.permanent_failures == report.recipients


def test_postfix_delay_warning_is_not_a_bounce():
    report = both_endings("postfix_delayed_441.eml")
    (rcpt,) = report.recipients
    assert (rcpt.final_recipient, rcpt.action, rcpt.status) == ("slow@example.net", "delayed", "4.4.1")
    assert rcpt.diagnostic_type == "x-postfix"
    assert rcpt.diagnostic_code == "connect to mail.example.net[198.51.100.9]:25: Connection timed out"
    assert rcpt.smtp_code == 450  # no SMTP reply in the diagnostic: from the status class
    assert not rcpt.is_permanent and report.permanent_failures == ()
    # text/rfc822-headers instead of the whole message
    assert report.original_message_id == "<0190c9a4-8888-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_exim_bounce_without_original_recipient():
    report = both_endings("exim_failed.eml")
    (rcpt,) = report.recipients
    assert rcpt.final_recipient == "gone@example.net" and rcpt.original_recipient is None
    assert rcpt.status == "5.0.0" and rcpt.is_permanent and rcpt.smtp_code == 550
    assert rcpt.enhanced_code == "5.1.1"  # the remote server's reply is more precise than Exim's 5.0.0
    assert report.reporting_mta == "mx.example.net"
    assert report.original_message_id == "<0190c9a4-9999-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_outlook_ndr():
    report = both_endings("outlook_ndr.eml")
    (rcpt,) = report.recipients
    assert rcpt.final_recipient == rcpt.original_recipient == "nobody@contoso.com"
    assert rcpt.status == "5.1.10" and rcpt.enhanced_code == "5.1.10"  # three-digit detail
    assert rcpt.diagnostic_code == ("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient nobody@contoso.com "
                                    "not found by SMTP address lookup")
    assert rcpt.is_permanent and rcpt.remote_mta is None
    assert report.reporting_mta == "AM6PR01MB1234.eurprd01.prod.exchangelabs.com"
    assert report.original_message_id == "<0190c9a4-aaaa-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_gmail_dsn():
    report = both_endings("gmail_dsn.eml")
    (rcpt,) = report.recipients
    assert rcpt.final_recipient == "old.friend@example.com" and rcpt.is_permanent
    # The multi-line reply (550-5.1.1 ... 550 5.1.1 ...) reads as one.
    assert rcpt.diagnostic_code.startswith(
        "550 5.1.1 The email account that you tried to reach does not exist. Please try double-checking")
    assert "550-" not in rcpt.diagnostic_code and rcpt.diagnostic_code.endswith("- gsmtp")
    assert rcpt.remote_mta.startswith("gmail-smtp-in.l.google.com.")
    assert report.reporting_mta == "googlemail.com"
    assert report.original_message_id == "<0190c9a4-bbbb-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_gmail_message_id_from_per_message_field_when_the_original_is_missing():
    data = sample("gmail_dsn.eml")
    data = data[:data.index(b"--0000000000001a2b3c060ddf5e61\nContent-Type: text/rfc822-headers")]
    assert reports.parse(data).original_message_id == "<0190c9a4-bbbb-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_two_recipients_with_upper_case_fields():
    report = both_endings("two_recipients.eml")
    assert report.original_envelope_id == "0190c9a4-cccc-7c3d-9f00-2a1b3c4d5e6f"
    ann, bob = report.recipients
    assert (ann.final_recipient, ann.original_recipient, ann.action) == ("Ann@Example.com", None, "failed")
    assert ann.diagnostic_code == "550 5.2.1 Mailbox disabled for this recipient"
    assert (bob.final_recipient, bob.original_recipient, bob.status) == ("bob@example.com", "robert@example.com",
                                                                         "5.2.2")
    assert bob.smtp_code == 552 and report.permanent_failures == (ann, bob)


def test_failed_with_a_temporary_status_is_not_permanent():
    # Postfix gives up on a message that sat in the queue too long: "failed" but 4.4.7.
    report = reports.parse(dsn(b"Action: failed\nStatus: 4.4.7\n"
                               b"Diagnostic-Code: X-Postfix; delivery temporarily suspended\n"))
    (rcpt,) = report.recipients
    assert rcpt.action == "failed" and not rcpt.is_permanent and rcpt.smtp_code == 450


@pytest.mark.parametrize(("fields", "code", "permanent"), [
    (b"Action: failed\nDiagnostic-Code: smtp; 554 rejected\n", 554, True),  # no Status at all
    (b"Action: FAILED\nStatus: 5.7.1 (delivery not authorized)\n", 550, True),
    (b"Action: delivered\nStatus: 2.0.0\n", 250, False),
    (b"Action: relayed\nStatus: 2.0.0\nDiagnostic-Code: smtp;250 2.0.0 OK\n", 250, False),
])
def test_recipient_helpers(fields, code, permanent):
    (rcpt,) = reports.parse(dsn(fields)).recipients
    assert rcpt.smtp_code == code and rcpt.is_permanent is permanent


def dsn(per_recipient: bytes, report_type: bytes = b"delivery-status") -> bytes:
    return (b"From: MAILER-DAEMON@mx.example.org\nTo: " + VERP.encode() + b"\nMIME-Version: 1.0\n"
            b"Content-Type: multipart/report; report-type=" + report_type + b"; boundary=BB\n\n"
            b"--BB\nContent-Type: text/plain\n\nIt failed.\n\n"
            b"--BB\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.org\n\n"
            b"Final-Recipient: rfc822; someone@example.org\n" + per_recipient + b"\n--BB--\n")


def test_a_report_missing_its_report_type_or_wrapped_in_mixed():
    assert reports.parse(dsn(b"Action: failed\nStatus: 5.1.1\n", b'""')).recipients[0].is_permanent
    inner = dsn(b"Action: failed\nStatus: 5.1.1\n")
    inner = inner[inner.index(b"Content-Type: multipart/report"):]
    wrapped = (b"From: gateway@example.org\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=OUT\n\n"
               b"--OUT\nContent-Type: text/plain\n\nDisclaimer.\n\n--OUT\n" + inner + b"\n--OUT--\n")
    assert reports.parse(wrapped).recipients[0].final_recipient == "someone@example.org"


def test_a_report_forwarded_as_an_attachment_is_not_a_report():
    forwarded = (b"From: someone@example.org\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=OUT\n\n"
                 b"--OUT\nContent-Type: text/plain\n\nFYI\n\n--OUT\nContent-Type: message/rfc822\n\n"
                 + dsn(b"Action: failed\nStatus: 5.1.1\n") + b"\n--OUT--\n")
    assert reports.parse(forwarded) is None


def test_yahoo_feedback_report():
    report = both_endings("yahoo_arf.eml")
    assert report == FeedbackReport(
        feedback_type="abuse",
        user_agent="Yahoo!-Mail-Feedback/2.0",
        original_mail_from=VERP,
        original_rcpt_to=("reader@yahoo.com",),
        arrival_date="Tue, 02 Jan 2024 18:40:01 +0000",  # Yahoo writes Received-Date
        source_ip="203.0.113.5",
        reported_domain="acme.example",
        original_message_id="<0190c9a4-dddd-7c3d-9f00-2a1b3c4d5e6f@acme.example>",
        original_to=("reader@yahoo.com",),
        original_return_path=VERP,
    )
    assert report.is_complaint


def test_microsoft_feedback_report_with_redacted_recipient():
    report = both_endings("microsoft_arf.eml")
    assert report.feedback_type == "abuse" and report.user_agent == "Microsoft Junk Mail Reporting Program"
    assert report.original_rcpt_to == () and report.original_to == ()  # redacted: nothing made up
    assert report.original_return_path == VERP and report.original_mail_from == VERP
    assert report.original_message_id == "<0190c9a4-eeee-7c3d-9f00-2a1b3c4d5e6f@acme.example>"
    assert report.arrival_date == "Tue, 02 Jan 2024 11:58:09 -0800" and report.source_ip == "203.0.113.5"


def test_feedback_report_reads_the_originals_recipient_headers():
    report = reports.parse(
        b"From: fbl@isp.example\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/report; report-type=feedback-report; boundary="f"\r\n\r\n'
        b"--f\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nVersion: 1\r\n\r\n"
        b"--f\r\nContent-Type: message/rfc822\r\n\r\nDelivered-To: ann@isp.example\r\n"
        b"X-Original-To: Ann.Alias@isp.example\r\nTo: Ann <ann@isp.example>, bob@isp.example\r\n"
        b"Cc: carol@isp.example, <dan@isp.example>\r\nSubject: Hi\r\n\r\nHi\r\n--f--\r\n")
    assert report.original_rcpt_to == ()
    assert report.original_delivered_to == ("ann@isp.example", "Ann.Alias@isp.example")
    assert report.original_to == ("ann@isp.example", "bob@isp.example")
    assert report.original_cc == ("carol@isp.example", "dan@isp.example")


def test_feedback_report_with_lower_case_fields_and_a_base64_original():
    report = both_endings("cloudmark_style_arf_base64.eml")
    assert report.feedback_type == "abuse"  # "Abuse" as written
    assert report.original_rcpt_to == ("subscriber@comcast.example", "second@comcast.example")
    assert report.original_to == ("subscriber@comcast.example",)
    assert report.original_return_path == VERP and report.original_mail_from == VERP
    assert report.original_message_id == "<0190c9a4-ffff-7c3d-9f00-2a1b3c4d5e6f@acme.example>"


def test_not_spam_is_a_report_but_not_a_complaint():
    data = sample("yahoo_arf.eml").replace(b"Feedback-Type: abuse", b"Feedback-Type: not-spam")
    report = reports.parse(data)
    assert report.feedback_type == "not-spam" and not report.is_complaint


def test_read_receipts_are_not_reports():
    mdn = (b"From: reader@example.com\nMIME-Version: 1.0\nContent-Type: multipart/report; "
           b"report-type=disposition-notification; boundary=MM\n\n--MM\nContent-Type: text/plain\n\nRead.\n\n"
           b"--MM\nContent-Type: message/disposition-notification\n\nReporting-UA: mail.example.com; Webmail\n"
           b"Final-Recipient: rfc822; reader@example.com\nDisposition: manual-action/MDN-sent-manually; displayed\n"
           b"\n--MM--\n")
    assert reports.parse(mdn) is None


@pytest.mark.parametrize("name", ["auto_reply.eml", "qmail_plain_bounce.eml"])
def test_auto_replies_and_plain_text_bounces_are_not_reports(name):
    assert reports.parse(sample(name)) is None
    assert reports.parse(sample(name, crlf=True)) is None


@pytest.mark.parametrize("data", [
    b"", b"\r\n", b"\x00\xff\xfe" * 100, b"Content-Type: multipart/report\r\n\r\n",
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n--x\r\n",
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n"
    b"--x\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; a\r\n\r\n--x--\r\n",
    b"Content-Type: multipart/report; report-type=feedback-report; boundary=x\r\n\r\n"
    b"--x\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!\r\n--x--\r\n",
    b"Content-Type: multipart/mixed; boundary=x\r\n\r\n" + b"--x\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"
    * 200,
])
def test_garbage_is_none(data):
    assert reports.parse(data) is None


def test_fuzz_never_raises():
    rng = random.Random(5965)
    for _ in range(200):
        assert reports.parse(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))) is None
    for name in sorted(p.name for p in SAMPLES.glob("*.eml")):
        data = sample(name, crlf=rng.random() < 0.5)
        for cut in sorted(rng.sample(range(len(data)), 40)):
            result = reports.parse_or_raise(data[:cut])  # truncated MIME; not even the safety net in parse() is needed
            assert result is None or isinstance(result, DeliveryReport | FeedbackReport)
        for _ in range(40):
            mutated = bytearray(data)
            for _ in range(rng.randrange(1, 30)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            result = reports.parse_or_raise(bytes(mutated))
            assert result is None or isinstance(result, DeliveryReport | FeedbackReport)
    assert reports.parse("not bytes") is None  # type: ignore[arg-type]
