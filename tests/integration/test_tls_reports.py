"""TLS reporting (RFC 8460): counted sessions become one JSON report per domain and finished
day, POSTed gzip-compressed to the https rua of _smtp._tls through the one gate (a real HTTPS
server on loopback, private targets allowed for the test only), once."""

import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest_twisted as pt

from mailsvc.delivery.connections import Authentication
from tests.helpers.outside import HttpsReceiver, Reply, ThrowawayCA


@pt.ensureDeferred
async def test_a_finished_day_is_reported_once(start_mta_with, dns_server, tmp_path):
    ca = ThrowawayCA()
    receiver = HttpsReceiver(ca, "tlsrpt.example.org")
    try:
        mta = await start_mta_with(MAILSVC_SECURITY_CA_FILE=ca.write(tmp_path / "ca.pem"))
        dns_server.a("tlsrpt.example.org", "127.0.0.1")
        dns_server.txt("_smtp._tls.rpt.example.org",
                       f"v=TLSRPTv1; rua=mailto:x@example.org,https://tlsrpt.example.org:{receiver.number}/r")
        receiver.receiver.default = Reply(201)
        reports = mta.parts.tls_reports
        yesterday = datetime.now(UTC).date() - timedelta(days=1)
        sts = Authentication("sts", True, "mx.rpt.example.org", "rpt.example.org", policy_text="version: STSv1")
        for result in ("success", "success", "certificate-host-mismatch"):
            reports.count(sts, result)
        # Counted "yesterday": move the counts there.
        await reports.flush()
        await mta.parts.db.execute("UPDATE tls_report_counts SET day = %s", (yesterday,))
        await reports.send_due()
        await reports.send_due()
        (request,) = receiver.receiver.received
        assert request.headers["content-type"] == "application/tlsrpt+gzip"
        report = json.loads(gzip.decompress(request.body))
        (policy,) = report["policies"]
        assert policy["policy"]["policy-type"] == "sts" and policy["policy"]["policy-domain"] == "rpt.example.org"
        assert policy["summary"] == {"total-successful-session-count": 2, "total-failure-session-count": 1}
        assert policy["failure-details"] == [{"result-type": "certificate-host-mismatch",
                                              "receiving-mx-hostname": "mx.rpt.example.org",
                                              "failed-session-count": 1}]
        assert report["date-range"]["start-datetime"] == f"{yesterday.isoformat()}T00:00:00Z"
        (sent,) = await mta.parts.db.fetchall("SELECT outcome FROM tls_reports_sent")
        assert sent["outcome"] == "sent"
    finally:
        await receiver.stop()


@pt.ensureDeferred
async def test_a_report_to_a_mailto_rua_is_mailed_signed_through_the_mta(start_mta_with, dns_server):
    import email
    import email.policy

    from tests.helpers.mta import DOMAIN
    from tests.helpers.signing import signing_sender, verdicts

    first = await start_mta_with()
    tenant, _, _ = await signing_sender(first)  # the operator's own account, its domain verified
    mta = await start_mta_with(MAILSVC_TLSRPT_ACCOUNT=tenant["id"],
                               MAILSVC_TLSRPT_SENDER=f"TLS reports <tlsrpt@{DOMAIN}>")
    mta.route("rpt.example.org")
    dns_server.txt("_smtp._tls.rpt.example.org", "v=TLSRPTv1; rua=mailto:tls-reports@rpt.example.org")
    reports = mta.parts.tls_reports
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    tlsa = Authentication("dane", True, "mx.rpt.example.org", "rpt.example.org", policy_text="3 1 1 ab")
    for result in ("success", "tlsa-invalid"):
        reports.count(tlsa, result)
    await reports.flush()
    await mta.parts.db.execute("UPDATE tls_report_counts SET day = %s", (yesterday,))
    await reports.send_due()
    await reports.send_due()
    (sent,) = await mta.parts.db.fetchall("SELECT outcome FROM tls_reports_sent")
    assert sent["outcome"] == "mailed"

    await mta.sink.wait_for(1, timeout=60)
    await mta.settled()
    (received,) = mta.sink.messages
    assert received.rcpt_to == ["tls-reports@rpt.example.org"]
    parsed = email.message_from_bytes(received.data, policy=email.policy.default)
    assert parsed.get_content_type() == "multipart/report" and parsed.get_param("report-type") == "tlsrpt"
    assert parsed["TLS-Report-Domain"] == "rpt.example.org" and parsed["TLS-Report-Submitter"] == "mta.mailsvc.test"
    assert parsed["Subject"].startswith("Report Domain: rpt.example.org Submitter: mta.mailsvc.test Report-ID: <")
    assert parsed["From"].addresses[0].addr_spec == f"tlsrpt@{DOMAIN}"
    human, attached = parsed.iter_parts()
    assert human.get_content_type() == "text/plain"
    assert attached.get_content_type() == "application/tlsrpt+gzip"
    assert attached.get_filename().startswith("mta.mailsvc.test!rpt.example.org!")
    assert attached.get_filename().endswith(".json.gz")
    report = json.loads(gzip.decompress(attached.get_content()))
    (policy,) = report["policies"]
    assert policy["policy"]["policy-type"] == "tlsa"
    assert policy["summary"] == {"total-successful-session-count": 1, "total-failure-session-count": 1}
    verdict = await verdicts(mta, received.data)
    assert verdict and all(verdict)  # DKIM-signed by the account's domain at delivery
