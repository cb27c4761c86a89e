"""The MTA end to end: accepted mail leaves through our SMTP client to a real sink on loopback,
routed by MX records on a real DNS server, and every outcome comes back as rows and events."""

import email
import email.policy
import json
import uuid

import dkim as dkimpy
import psycopg2
import pytest_twisted as pt
import svix.webhooks
from twisted.internet import defer, task, threads
from twisted.names import dns

from mailsvc.app.domains import SigningKeys
from mailsvc.crypto import credentials
from mailsvc.delivery.door import Door
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.mail import dkim as signing
from mailsvc.mail import simulated, verp
from mailsvc.store.deliveries import ClaimedAccount, ClaimedDelivery
from tests.helpers.polling import async_until
from tests.helpers.sending import email_content
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)


@pt.ensureDeferred
async def test_mail_is_delivered_signed_with_a_verp_return_path(mta):
    mta.route("example.net")
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net", "Bob <bob@example.net>"], cc="carl@example.net")
    await mta.sink.wait_for(1)
    await mta.settled()

    (received,) = mta.sink.messages  # one transaction for the three recipients at one domain
    assert sorted(received.rcpt_to) == ["ann@example.net", "bob@example.net", "carl@example.net"]
    assert received.helo == "mta.mailsvc.test" and received.tls
    local, _, host = received.mail_from.partition("@")
    assert host == "bounces.acme.example.com" and local.startswith("b-")
    message = email.message_from_bytes(received.data, policy=email.policy.strict)
    assert len(message.get_all("DKIM-Signature")) == 2 and message["Subject"] == "Hello"

    rows = await mta.deliveries(email_id)
    assert [r["status"] for r in rows] == ["delivered"] * 3 and all(r["attempts"] == 1 for r in rows)
    assert verp.delivery_of(mta.verp_key, received.mail_from) in {r["id"] for r in rows}
    delivered = await mta.events("email.delivered")
    assert sorted(e["recipient"] for e in delivered) == ["ann@example.net", "bob@example.net", "carl@example.net"]
    assert {(e["transport"], e["remote_host"]) for e in delivered} == {("smtp", "mx.example.net")}
    assert all(e["response"].startswith("250") and e["email_id"] == email_id for e in delivered)
    got = await mta.json("GET", f"/emails/{email_id}", key)
    assert got[1]["last_event"] == "delivered"
    _, metrics = await mta.request("GET", "/metrics", mta.operator_token)
    assert b'mailsvc_delivery_outcomes_total{outcome="delivered"} 3.0' in metrics


@pt.ensureDeferred
async def test_a_refused_recipient_bounces_and_is_suppressed(mta):
    mta.route("example.net")
    mta.sink.rcpt_replies["gone@example.net"] = b"550 5.1.1 <gone@example.net>: no such user"
    _, key = await mta.sender()
    email_id = await mta.send(key, ["gone@example.net", "ann@example.net"])
    await mta.sink.wait_for(1)
    await mta.settled()

    assert mta.sink.messages[0].rcpt_to == ["ann@example.net"]
    statuses = {r["recipient"]: r["status"] for r in await mta.deliveries(email_id)}
    assert statuses == {"gone@example.net": "bounced", "ann@example.net": "delivered"}
    (bounce,) = await mta.events("email.bounced")
    assert bounce["recipient"] == "gone@example.net" and bounce["type"] == "hard" and bounce["source"] == "smtp"
    assert (bounce["code"], bounce["enhanced_code"]) == (550, "5.1.1") and "no such user" in bounce["message"]
    code, suppression, _ = await mta.json("GET", "/suppressions/gone@example.net", key)
    assert code == 200 and suppression["origin"] == "hard_bounce" and suppression["source_id"] == email_id
    assert (await mta.json("GET", f"/emails/{email_id}", key))[1]["last_event"] == "bounced"
    # The next email to that address is skipped at once.
    again = await mta.send(key, ["gone@example.net"])
    assert [r["status"] for r in await mta.deliveries(again)] == ["suppressed"]


@pt.ensureDeferred
async def test_a_temporary_refusal_is_retried_until_delivered(mta):
    mta.route("example.net")
    mta.sink.rcpt_replies["ann@example.net"] = b"451 4.7.1 greylisted, try again later"
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred" and row["attempts"] == 1 and "greylisted" in row["last_response"]
    (delayed,) = await mta.events("email.delivery_delayed")
    assert delayed["attempt"] == 1 and delayed["class"] == "transient"
    assert (delayed["code"], delayed["enhanced_code"]) == (451, "4.7.1")
    assert delayed["next_attempt_at"].endswith("Z")
    assert (await mta.json("GET", f"/emails/{email_id}", key))[1]["last_event"] == "delivery_delayed"

    del mta.sink.rcpt_replies["ann@example.net"]
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE id = %s", (row["id"],))
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    (row,) = await mta.deliveries(email_id)
    assert row["status"] == "delivered" and row["attempts"] == 2


@pt.ensureDeferred
async def test_the_retry_window_ends_in_failure(mta):
    mta.route("example.net")
    mta.sink.rcpt_replies["ann@example.net"] = b"452 4.2.2 mailbox full"
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred"
    await mta.parts.db.execute(
        "UPDATE deliveries SET retry_until = now() - interval '1 hour', due_at = now() WHERE id = %s", (row["id"],))
    mta.parts.delivery.wake()
    (row,) = await mta.settled_past(email_id, "deferred")
    assert row["status"] == "failed" and row["due_at"] is None and row["attempts"] == 2
    (failed,) = await mta.events("email.failed")
    assert failed["reason"] == "retry_window_exhausted" and failed["recipient"] == "ann@example.net"
    assert (await mta.json("GET", f"/emails/{email_id}", key))[1]["last_event"] == "failed"


@pt.ensureDeferred
async def test_null_mx_and_missing_domains_bounce(mta):
    mta.dns.add("example.org", dns.Record_MX(0, b"", ttl=60))  # RFC 7505: "0 ."
    mta.route("example.net")
    _, key = await mta.sender()
    null_mx = await mta.send(key, ["ann@example.org"])
    missing = await mta.send(key, ["ann@nowhere.example.net"])
    (row,) = await mta.settled_past(null_mx)
    assert row["status"] == "bounced" and "null MX" in row["last_response"]
    (row,) = await mta.settled_past(missing)
    assert row["status"] == "bounced" and row["last_response"].startswith("550 5.1.2")


@pt.ensureDeferred
async def test_no_mx_falls_back_to_the_address_and_dead_hosts_are_skipped(mta):
    mta.dns.a("example.org", "127.0.0.1")  # no MX: the domain's own address
    mta.dns.mx("example.net", "dead.example.net", 5)  # preferred, but nothing listens there
    mta.dns.a("dead.example.net", "127.0.0.2")
    mta.dns.mx("example.net", "mx.example.net", 10)
    mta.dns.a("mx.example.net", "127.0.0.1")
    _, key = await mta.sender()
    first = await mta.send(key, ["ann@example.org"])
    second = await mta.send(key, ["bob@example.net"])
    assert [r["status"] for r in await mta.settled_past(first)] == ["delivered"]
    assert [r["status"] for r in await mta.settled_past(second)] == ["delivered"]
    assert mta.parts.delivery.routes.is_bad("dead.example.net")


@pt.ensureDeferred
async def test_an_unreachable_domain_is_deferred(mta):
    mta.dns.mx("example.net", "dead.example.net", 5)
    mta.dns.a("dead.example.net", "127.0.0.2")
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred"
    (delayed,) = await mta.events("email.delivery_delayed")
    assert delayed["class"] == "unreachable" and "dead.example.net" in delayed["message"]


@pt.ensureDeferred
async def test_enforced_tls_is_not_given_up(mta):
    mta.route("example.net")
    mta.sink.starttls = False
    _, key = await mta.sender()
    await mta.parts.db.execute("UPDATE domains SET tls = 'enforced'")
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred" and mta.sink.messages == []
    (delayed,) = await mta.events("email.delivery_delayed")
    assert delayed["class"] == "blocked"


@pt.ensureDeferred
async def test_a_lease_lost_before_data_sends_nothing(mta):
    """Right before DATA the node proves its claim still holds; here another node took it."""
    mta.route("example.net")
    _, key = await mta.sender()
    mta.sink.greeting_gate = defer.Deferred()
    email_id = await mta.send(key, ["ann@example.net"])
    await mta.sink.wait_for_connections(1)  # claimed, and its session is opening
    other = uuid.uuid4()
    taken = await mta.parts.db.fetchall(
        "UPDATE deliveries SET claim = %s, claimed_by = 'another node' WHERE email_id = %s AND claim IS NOT NULL"
        " RETURNING id", (other, email_id))
    assert len(taken) == 1
    mta.sink.greeting_gate.callback(None)
    await mta.settled()
    assert mta.sink.data_ends == 0 and mta.sink.messages == []
    (row,) = await mta.parts.db.fetchall("SELECT status, claim, attempts FROM deliveries WHERE email_id = %s",
                                         (email_id,))
    assert (row["status"], row["claim"], row["attempts"]) == ("queued", other, 0)  # left to its holder
    assert await mta.events("email.delivery_delayed") == []


@pt.ensureDeferred
async def test_a_renewal_unanswered_by_the_deadline_gives_the_delivery_back(start_mta_with):
    """
    A failover longer than an attempt's deadline (the pg_auto_failover drill, docs/operations.md):
    the renewal before DATA waits on the database past the deadline. Nothing was sent and the
    destination is not at fault, so the delivery goes back to the queue, neither deferred for a
    retry cycle nor reported delayed. Another transaction holding the row stands in for the
    database that does not answer.
    """
    mta = await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS="10")  # the deadline: 5 s after the claim
    mta.route("example.net")
    _, key = await mta.sender()
    mta.sink.greeting_gate = defer.Deferred()
    email_id = await mta.send(key, ["ann@example.net"])
    await mta.sink.wait_for_connections(1)  # claimed, and its session is opening
    holder = await threads.deferToThread(psycopg2.connect, mta.parts.db.dsn)

    def rows(sql: str, args=()) -> list[tuple]:
        with holder.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    try:
        locked = await threads.deferToThread(rows, "SELECT id FROM deliveries WHERE email_id = %s FOR UPDATE",
                                             (email_id,))
        assert len(locked) == 1
        mta.sink.greeting_gate.callback(None)
        # The renewal waits for the row, then, once the deadline has aborted the session, the give-back.
        waiting = ("SELECT count(*) FROM pg_stat_activity"
                   " WHERE wait_event_type = 'Lock' AND datname = current_database()")
        await async_until(lambda: threads.deferToThread(lambda: rows(waiting)[0][0] >= 2), 30,
                          "the renewal and the give-back waiting for the locked row", interval=0.1)
        assert mta.sink.data_ends == 0
    finally:
        holder.rollback()
        holder.close()
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "delivered" and len(mta.sink.messages) == 1
    assert await mta.events("email.delivery_delayed") == []


@pt.ensureDeferred
async def test_a_transaction_is_over_within_half_the_lease(start_mta_with):
    mta = await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS="2")
    mta.route("example.net")
    mta.sink.final_delays = [30]  # the final reply would come long after the lease
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred" and row["attempts"] == 1
    await mta.sink.until(lambda: mta.sink.replies_waiting == 0)  # the connection was dropped
    assert mta.sink.data_ends == 1 and mta.sink.messages == []
    (delayed,) = await mta.events("email.delivery_delayed")
    assert delayed["class"] == "transient" and "deadline passed" in delayed["message"]


@pt.ensureDeferred
async def test_a_delivery_that_waited_for_a_connection_until_its_deadline_goes_back_unattempted(start_mta_with):
    # A lease long enough that the second delivery, given back, is sent within its own deadline
    # on a loaded machine.
    mta = await start_mta_with(MAILSVC_DELIVERY_LEASE_SECONDS="8", MAILSVC_DELIVERY_PER_DESTINATION="1")
    mta.route("example.net")
    mta.sink.final_delays = [30]  # the one connection is busy past the deadline
    _, key = await mta.sender()
    code, sent, _ = await mta.json("POST", "/emails/batch", key, json=[
        {"from": "Acme <news@acme.example.com>", "to": [f"u{i}@example.net"], "subject": "s", "text": "t"}
        for i in range(2)])
    assert code == 200
    await mta.sink.wait_for(1, timeout=30)
    await mta.settled()
    rows = {r["status"]: r for r in await mta.parts.db.fetchall("SELECT status, attempts, id FROM deliveries")}
    assert rows.keys() == {"deferred", "delivered"}
    assert rows["deferred"]["attempts"] == 1 and rows["delivered"]["attempts"] == 1
    (delayed,) = await mta.events("email.delivery_delayed")  # none for the one that only waited
    assert delayed["delivery_id"] == str(rows["deferred"]["id"])


@pt.ensureDeferred
async def test_connections_are_reused(mta):
    mta.route("example.net")
    _, key = await mta.sender()
    for i in range(5):
        await mta.send(key, [f"user{i}@example.net"])
        await mta.sink.wait_for(i + 1)
        await mta.settled()
    assert mta.sink.connections == 1 and len(mta.sink.messages) == 5


@pt.ensureDeferred
async def test_relay_mode_goes_through_the_smarthost(start_mta_with, smtp_sink, tmp_path):  # noqa: F811
    ca_file = tmp_path / "sink.pem"
    ca_file.write_bytes(smtp_sink.cert_pem)  # the smarthost's certificate is verified
    mta = await start_mta_with(
        MAILSVC_DELIVERY_RELAY_HOST="localhost", MAILSVC_DELIVERY_RELAY_PORT=str(smtp_sink.port),
        MAILSVC_DELIVERY_RELAY_USERNAME="relay-user", MAILSVC_DELIVERY_RELAY_PASSWORD="relay-secret",
        MAILSVC_SECURITY_CA_FILE=str(ca_file),
    )
    mta.sink.require_auth = True
    mta.sink.rcpt_replies["bob@example.org"] = b"550 5.7.1 relaying denied for this sender"
    tenant, key = await mta.sender()
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token, json={"delivery_mode": "relay"})
    # No MX anywhere: the recipients' domains are never looked up.
    email_id = await mta.send(key, ["ann@example.net", "bob@example.org"])
    rows = await mta.settled_past(email_id)
    assert {r["recipient"]: r["status"] for r in rows} == {"ann@example.net": "delivered", "bob@example.org": "bounced"}
    (received,) = mta.sink.messages
    assert received.auth_user == "relay-user" and received.tls and received.rcpt_to == ["ann@example.net"]
    (delivered,) = await mta.events("email.delivered")
    assert (delivered["transport"], delivered["remote_host"]) == ("relay", "localhost")
    (bounced,) = await mta.events("email.bounced")
    assert bounced["source"] == "relay" and bounced["code"] == 550
    assert not [q for q in mta.dns.queries if q[0].endswith("example.net") or q[0].endswith("example.org")]


@pt.ensureDeferred
async def test_two_nodes_never_deliver_one_message_twice(start_mta_with):
    first = await start_mta_with()
    second = await start_mta_with()
    first.route("example.net")
    _, key = await first.sender()
    ids = []
    for batch in range(4):
        code, sent, _ = await first.json("POST", "/emails/batch", key, json=[
            {"from": "Acme <news@acme.example.com>", "to": [f"u{batch}-{i}@example.net"], "subject": f"m{batch}-{i}",
             "text": "hi"} for i in range(50)])
        assert code == 200, sent
        ids += [e["id"] for e in sent["data"]]
    await first.sink.wait_for(200, timeout=30)
    await first.settled()
    await second.settled()
    received = sorted(r for m in first.sink.messages for r in m.rcpt_to)
    assert len(received) == len(set(received)) == 200
    rows = await first.parts.db.fetchall("SELECT status, attempts, claimed_by FROM deliveries")
    assert {r["status"] for r in rows} == {"delivered"} and {r["attempts"] for r in rows} == {1}


@pt.ensureDeferred
async def test_capture_mode_and_deleted_domains_are_decided_without_sending(mta):
    mta.route("example.net")
    tenant, key = await mta.sender()
    await mta.send(key, ["warm@example.net"])  # the key check (with the tenant) is cached from here
    await mta.sink.wait_for(1)
    await mta.parts.db.execute("UPDATE tenants SET status = 'paused'")  # queued mail waits
    captured = await mta.send(key, ["ann@example.net"])
    await mta.settled()
    assert [r["status"] for r in await mta.deliveries(captured)] == ["queued"]
    await mta.parts.db.execute("UPDATE tenants SET status = 'active', delivery_mode = 'capture'")
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE status = 'queued'")
    mta.parts.delivery.wake()
    (row,) = await mta.settled_past(captured)
    assert row["status"] == "delivered" and len(mta.sink.messages) == 1  # only the first one was sent
    (event,) = [e for e in await mta.events("email.delivered") if e["recipient"] == "ann@example.net"]
    assert event["transport"] == "capture"

    await mta.parts.db.execute("UPDATE tenants SET status = 'paused', delivery_mode = 'direct'")
    orphan = await mta.send(key, ["bob@example.net"])
    await mta.parts.db.execute("DELETE FROM domains")
    await mta.parts.db.execute("UPDATE tenants SET status = 'active'")
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE status = 'queued'")
    mta.parts.delivery.wake()
    (row,) = await mta.settled_past(orphan)
    assert row["status"] == "failed"
    (failed,) = await mta.events("email.failed")
    assert failed["reason"] == "content_expired"


@pt.ensureDeferred
async def test_connections_per_destination_are_capped(start_mta_with):
    mta = await start_mta_with(MAILSVC_DELIVERY_PER_DESTINATION="2")
    mta.route("example.net")
    mta.sink.delay = 0.01  # a slow server: transactions overlap
    _, key = await mta.sender()
    code, sent, _ = await mta.json("POST", "/emails/batch", key, json=[
        {"from": "Acme <news@acme.example.com>", "to": [f"u{i}@example.net"], "subject": "s", "text": "t"}
        for i in range(20)])
    assert code == 200
    await mta.sink.wait_for(20, timeout=30)
    await mta.settled()
    assert mta.sink.max_concurrent == 2 and mta.sink.connections == 2


@pt.ensureDeferred
async def test_a_server_closing_with_421_defers(mta):
    mta.route("example.net")
    mta.sink.close_after_mail = True
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    assert row["status"] == "deferred" and row["last_response"].startswith("421")
    (delayed,) = await mta.events("email.delivery_delayed")
    assert (delayed["class"], delayed["code"]) == ("transient", 421)
    # The next attempt, once the server is well again, goes through on a new connection.
    mta.sink.close_after_mail = False
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now()")
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    assert [r["status"] for r in await mta.deliveries(email_id)] == ["delivered"]


@pt.ensureDeferred
async def test_the_first_retry_knob_brings_a_deferral_back_after_its_seconds(start_mta_with):
    """``delivery.test_first_retry_seconds`` (the drills' knob, tests/helpers/drills.py): a deferred
    delivery comes due after that long instead of the schedule's minute, and goes by itself."""
    mta = await start_mta_with(MAILSVC_DELIVERY_TEST_FIRST_RETRY_SECONDS="5")
    mta.route("example.net")
    mta.sink.close_after_mail = True
    _, key = await mta.sender()
    email_id = await mta.send(key, ["ann@example.net"])
    (row,) = await mta.settled_past(email_id)
    mta.sink.close_after_mail = False  # the retry (at least 4 s on) finds the server well
    assert row["status"] == "deferred"
    (waited,) = await mta.parts.db.fetchall(
        "SELECT extract(epoch FROM due_at - now()) AS seconds FROM deliveries WHERE email_id = %s", (email_id,))
    assert waited["seconds"] <= 6  # the schedule's first wait is at least 48 s
    await mta.sink.wait_for(1, timeout=30)
    await mta.settled()
    assert [(r["status"], r["attempts"]) for r in await mta.deliveries(email_id)] == [("delivered", 2)]


# Test addresses, capture mode and the development inbox

TEST_FROM = "Acme <onboarding@resend.dev>"


async def _no_domain(mta) -> tuple[dict, str]:
    """A tenant without any domain, paced at 1,000/s."""
    tenant, key = await mta.api.tenant()
    code, tenant, _ = await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token,
                                     json={"send_rate_per_sec": 1000})
    assert code == 200, tenant
    return tenant, key


async def _test_send(mta, key: str, to: list[str]) -> str:
    code, sent, _ = await mta.json("POST", "/emails", key, json={
        "from": TEST_FROM, "to": to, "subject": "Trying", "html": "<p>Hi</p>"})
    assert code == 200, sent
    return sent["id"]


async def _settled_to_the_end(mta, email_id: str) -> dict:
    """Deliveries by recipient once none is queued and every report the door made is written."""
    rows = await mta.settled_past(email_id)
    for _ in range(50):
        await mta.settled()
        rows = await mta.deliveries(email_id)
        if all(r["status"] in ("delivered", "bounced", "complained", "suppressed") for r in rows) and not any(
                r["status"] == "delivered" and r["recipient"].startswith("complained") for r in rows):
            break
    return {r["recipient"]: r for r in rows}


@pt.ensureDeferred
async def test_test_addresses_complete_as_they_say_without_leaving_the_node(mta):
    tenant, key = await _no_domain(mta)
    email_id = await _test_send(mta, key, ["delivered+a@resend.dev", "bounced+a@resend.dev",
                                           "complained+a@resend.dev"])
    rows = await _settled_to_the_end(mta, email_id)
    assert {r: row["status"] for r, row in rows.items()} == {
        "delivered+a@resend.dev": "delivered", "bounced+a@resend.dev": "bounced",
        "complained+a@resend.dev": "complained"}
    assert mta.sink.messages == [] and mta.sink.connections == 0  # nothing left
    (bounce,) = await mta.events("email.bounced")
    assert bounce["recipient"] == "bounced+a@resend.dev" and bounce["source"] == "dsn"  # through the return path
    assert (bounce["type"], bounce["code"], bounce["enhanced_code"]) == ("hard", 550, "5.1.1")
    delivered = {e["recipient"]: e for e in await mta.events("email.delivered")}
    assert set(delivered) == {"delivered+a@resend.dev", "complained+a@resend.dev"}  # delivered, then complained
    assert delivered["delivered+a@resend.dev"]["transport"] == "test"
    (complaint,) = await mta.events("email.complained")
    assert complaint["recipient"] == "complained+a@resend.dev" and complaint["source"] == "fbl"
    _, got, _ = await mta.json("GET", f"/emails/{email_id}", key)
    assert got["last_event"] == "complained"
    # The test addresses' rules: the exact addresses, label included, are suppressed; nothing else.
    _, listed, _ = await mta.json("GET", "/suppressions", key)
    assert sorted((s["email"], s["origin"]) for s in listed["data"]) == [
        ("bounced+a@resend.dev", "hard_bounce"), ("complained+a@resend.dev", "complaint")]
    # ... and the guard neither counts them nor runs.
    (stats,) = await mta.parts.db.fetchall("SELECT * FROM delivery_stats WHERE tenant_id = %s", (tenant["id"],))
    assert (stats["delivered"], stats["bounced"], stats["complained"]) == (0, 0, 0)
    assert (stats["test_delivered"], stats["test_bounced"], stats["test_complained"]) == (2, 1, 1)
    _, account, _ = await mta.json("GET", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token)
    assert account["status"] == "active"
    # Sent again, the suppressed addresses are skipped; a new label is not.
    again = await _test_send(mta, key, ["bounced+a@resend.dev", "bounced+b@resend.dev"])
    rows = await _settled_to_the_end(mta, again)
    assert {r: row["status"] for r, row in rows.items()} == {
        "bounced+a@resend.dev": "suppressed", "bounced+b@resend.dev": "bounced"}


@pt.ensureDeferred
async def test_test_address_events_reach_webhooks_signed(start_mta_with, https_receiver, ca, tmp_path):  # noqa: F811
    mta = await start_mta_with(MAILSVC_SECURITY_CA_FILE=str(ca.write(tmp_path / "ca.pem")))
    mta.dns.a("hooks.example.com", "127.0.0.1")
    _, key = await _no_domain(mta)
    code, hook, _ = await mta.json("POST", "/webhooks", key, json={
        "endpoint": f"https://hooks.example.com:{https_receiver.number}/hook",
        "events": ["email.delivered", "email.bounced", "email.complained"]})
    assert code == 201, hook
    email_id = await _test_send(mta, key, ["delivered@resend.dev", "bounced@resend.dev", "complained@resend.dev"])
    await _settled_to_the_end(mta, email_id)
    await mta.parts.dispatcher.step()
    await mta.parts.dispatcher.settled()
    seen = []
    for request in https_receiver.receiver.received:
        headers = {k: v for k, v in request.headers.items() if k.startswith("svix-")}
        svix.webhooks.Webhook(hook["signing_secret"]).verify(request.body, headers)  # raises unless signed
        document = json.loads(request.body)
        seen.append((document["type"], document["data"]["to"]))
    assert sorted(seen) == [
        ("email.bounced", ["bounced@resend.dev"]), ("email.complained", ["complained@resend.dev"]),
        ("email.delivered", ["complained@resend.dev"]), ("email.delivered", ["delivered@resend.dev"])]


@pt.ensureDeferred
async def test_the_test_sender_never_sends_real_mail(mta):
    """Mail the accept path could not have let through (written here directly) fails at the door."""
    mta.route("example.net")
    _, key = await _no_domain(mta)
    await _settled_to_the_end(mta, await _test_send(mta, key, ["delivered@resend.dev"]))  # the key is cached
    await mta.parts.db.execute("UPDATE tenants SET status = 'paused'")  # queued mail waits
    email_id = await _test_send(mta, key, ["delivered@resend.dev"])
    await mta.parts.db.execute("UPDATE deliveries SET recipient = 'ann@example.net' WHERE email_id = %s", (email_id,))
    await mta.parts.db.execute("UPDATE tenants SET status = 'active'")
    await mta.parts.db.execute("UPDATE deliveries SET due_at = now() WHERE status = 'queued'")
    mta.parts.delivery.wake()
    rows = await mta.settled_past(email_id)
    assert [r["status"] for r in rows] == ["failed"] and mta.sink.messages == []


@pt.ensureDeferred
async def test_capture_mode_signs_and_keeps_the_message_in_the_inbox(mta):
    mta.route("example.net")
    tenant, key = await mta.sender()
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token, json={"delivery_mode": "capture"})
    email_id = await mta.send(key, ["ann@example.net", "bob@example.net"])
    rows = await mta.settled_past(email_id)
    assert [r["status"] for r in rows] == ["delivered", "delivered"] and mta.sink.messages == []
    events = [e for e in await mta.events("email.delivered")]
    assert {e["transport"] for e in events} == {"capture"}
    (kept,) = await mta.parts.db.fetchall("SELECT * FROM inbox")
    assert kept["recipients"] == ["ann@example.net", "bob@example.net"] and kept["outcome"] == "captured"
    assert str(kept["email_id"]) == email_id and not kept["simulated"]
    message = bytes(kept["message"])
    assert message.startswith(b"DKIM-Signature:")
    key_row = await mta.parts.db.fetchone("SELECT selector, private_key, id FROM dkim_keys")
    keys = SigningKeys(credentials.vault(mta.master, (), "dkim-keys"))  # as every node of this master opens them
    opened = keys.signer(key_row["id"], key_row["selector"], signing.RSA, key_row["private_key"])
    record = f"v=DKIM1; k=rsa; p={signing.public_key_of(opened.private_key)}".encode()
    assert dkimpy.verify(message, dnsfunc=lambda name, timeout=5: record)


@pt.ensureDeferred
async def test_the_inbox_keeps_the_newest_messages_per_account(api):
    tenant, _ = await api.tenant()
    other, _ = await api.tenant()
    clock = task.Clock()
    door = Door(clock, api.parts.db, TestAddresses(), simulated.test_signer(b"k" * 32), "mx.test", None, inbox_size=5)
    row = email_content(sender="a@acme.dev", subject="s", domain="acme.dev")
    for n in range(7):
        for account in (tenant, other):
            clock.advance(1)
            work = ClaimedDelivery(uuid.uuid4(), uuid.uuid4(), f"r{n}@x.dev", 0, 0.0, False,
                                   ClaimedAccount(account["id"], "active", None, 10, "capture"))
            outcomes = await door.stop([work], row, b"Subject: s\r\n\r\nbody\r\n", "b@rp.acme.dev", None)
            assert [o.status for o in outcomes] == ["delivered"]
    for account in (tenant, other):
        kept = await api.parts.db.fetchall(
            "SELECT recipients FROM inbox WHERE tenant_id = %s ORDER BY id", (account["id"],))
        assert [k["recipients"] for k in kept] == [[f"r{n}@x.dev"] for n in range(2, 7)]
