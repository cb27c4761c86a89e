"""MTA-STS (RFC 8461) outbound, end to end: the policy is served by a real HTTPS server on
loopback (private targets allowed for the test only, its port through
security.test_mta_sts_port), found through ``_mta-sts`` TXT on the tests' DNS server, kept in
PostgreSQL; the sink presents certificates of a throw-away CA that match the MX name or not."""

import pytest
import pytest_twisted as pt

from tests.helpers.mta_sts import DOMAIN, MX, policy, serve
from tests.helpers.outside import Reply, ThrowawayCA


@pytest.fixture
def ca():
    return ThrowawayCA()


async def delayed(mta) -> list[dict]:
    return await mta.events("email.delivery_delayed")


@pt.ensureDeferred
async def test_enforce_delivers_to_a_matching_mx_with_a_valid_certificate(sts, ca):
    serve(sts, policy())
    sts.sink.certificate = ca.server_options(MX)
    _, key = await sts.sender()
    email_id = await sts.send(key, [f"ann@{DOMAIN}"])
    (row,) = await sts.settled_past(email_id)
    assert row["status"] == "delivered" and sts.sink.messages[0].tls
    (request,) = sts.policy_server.receiver.received
    assert request.path == "/.well-known/mta-sts.txt"
    (cached,) = await sts.parts.db.fetchall("SELECT domain, policy_id, mode, mx, max_age FROM mta_sts_policies")
    assert cached == {"domain": DOMAIN, "policy_id": "one1", "mode": "enforce", "mx": [MX], "max_age": 86400}
    await sts.parts.tls_reports.flush()
    counts = await sts.parts.db.fetchall("SELECT policy_type, mx_host, result, count FROM tls_report_counts")
    assert counts == [{"policy_type": "sts", "mx_host": MX, "result": "success", "count": 1}]


@pt.ensureDeferred
async def test_enforce_defers_on_a_certificate_for_another_name_and_fails_at_the_window_end(sts, ca):
    serve(sts, policy())
    sts.sink.certificate = ca.server_options("other.example.net")
    _, key = await sts.sender()
    email_id = await sts.send(key, [f"ann@{DOMAIN}"])
    (row,) = await sts.settled_past(email_id)
    assert row["status"] == "deferred" and not sts.sink.messages
    (event,) = await delayed(sts)
    assert event["class"] == "blocked" and (event["code"], event["enhanced_code"]) == (450, "4.7.5")
    assert "MTA-STS policy not met: certificate-host-mismatch" in event["message"]
    # Never bounced, never suppressed; the window's end fails it.
    await sts.parts.db.execute(
        "UPDATE deliveries SET retry_until = now() - interval '1 hour', due_at = now() WHERE id = %s", (row["id"],))
    sts.parts.delivery.wake()
    (row,) = await sts.settled_past(email_id, "deferred")
    assert row["status"] == "failed"
    (failed,) = await sts.events("email.failed")
    assert failed["reason"] == "retry_window_exhausted"
    assert not await sts.parts.db.fetchall("SELECT 1 FROM suppressions")
    await sts.parts.tls_reports.flush()
    results = await sts.parts.db.fetchall("SELECT result, count FROM tls_report_counts")
    assert results == [{"result": "certificate-host-mismatch", "count": 2}]


@pt.ensureDeferred
async def test_enforce_defers_when_the_certificate_is_not_trusted(sts):
    serve(sts, policy())
    sts.sink.certificate = ThrowawayCA("someone else").server_options(MX)
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "deferred" and not sts.sink.messages
    (event,) = await delayed(sts)
    assert event["class"] == "blocked" and "certificate-not-trusted" in event["message"]


@pt.ensureDeferred
async def test_enforce_defers_when_no_mx_matches_the_policy_without_connecting(sts, ca):
    serve(sts, policy(mx="mail.elsewhere.example"))
    sts.sink.certificate = ca.server_options(MX)
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "deferred" and sts.sink.connections == 0
    (event,) = await delayed(sts)
    assert event["class"] == "blocked" and "not named by the MTA-STS policy" in event["message"]


@pt.ensureDeferred
async def test_enforce_without_starttls_defers(sts, ca):
    serve(sts, policy(mx=f"*.{DOMAIN}"))
    sts.sink.starttls = False
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "deferred" and not sts.sink.messages
    (event,) = await delayed(sts)
    assert event["class"] == "blocked" and event["enhanced_code"] == "4.7.4"


@pt.ensureDeferred
async def test_testing_mode_only_reports(sts, ca):
    serve(sts, policy(mode="testing"))
    sts.sink.certificate = ca.server_options("other.example.net")
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "delivered"
    await sts.parts.tls_reports.flush()
    (count,) = await sts.parts.db.fetchall("SELECT policy_type, result, policy FROM tls_report_counts")
    assert count["policy_type"] == "sts" and count["result"] == "certificate-host-mismatch"
    assert "mode: testing" in count["policy"]


@pt.ensureDeferred
async def test_no_policy_falls_back_to_opportunistic_tls(sts):
    # No _mta-sts record: the self-signed localhost certificate of the sink is fine.
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "delivered" and sts.sink.messages[0].tls
    assert not sts.policy_server.receiver.received


@pt.ensureDeferred
async def test_a_policy_that_cannot_be_fetched_is_no_policy(sts):
    mta = sts
    mta.dns.txt(f"_mta-sts.{DOMAIN}", "v=STSv1; id=broken1;")
    mta.policy_server.receiver.default = Reply(404, {"Content-Type": "text/plain"}, b"nope")
    _, key = await mta.sender()
    (row,) = await mta.settled_past(await mta.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "delivered"


@pt.ensureDeferred
async def test_a_cached_policy_is_used_while_its_id_is_unchanged(sts, ca):
    serve(sts, policy())
    sts.sink.certificate = ca.server_options(MX)
    _, key = await sts.sender()
    policies = sts.parts.delivery.policies
    assert (await policies.sts_policy(DOMAIN)).mode == "enforce"
    # Another node (its memory empty) with the web server gone: PostgreSQL's copy applies.
    sts.policy_server.receiver.default = Reply(500)
    policies.forget(DOMAIN)
    assert (await policies.sts_policy(DOMAIN)).mx == (MX,)
    assert len(sts.policy_server.receiver.received) == 1
    # A new id is fetched again.
    serve(sts, policy(mode="testing"), record_id="two2")
    policies.forget(DOMAIN)
    assert (await policies.sts_policy(DOMAIN)).mode == "testing"


