"""
Every attempt of a webhook delivery, kept with its outcome (migration 0028), as the dashboard
shows it, and the dashboard's "retry now": real HTTPS requests to a receiver on loopback (one
that fails then succeeds, a closed port, one that never answers, a name the certificate does
not hold, a name that stopped resolving), the retries verified with the ``svix`` and
``standardwebhooks`` packages, the dashboard read and the retry over HTTP with a session.
"""

from __future__ import annotations

import socket
import time
import uuid
from datetime import UTC, datetime

import attrs
import pytest
import pytest_twisted as pt
import standardwebhooks
import svix.webhooks

from mailsvc.app.webhooks import RETRIES_PER_HOUR, RETRY_ACTION
from mailsvc.domain.webhooks import RETRY_DELAYS, new_webhook
from tests.helpers.dashboard import signed_in
from tests.helpers.outside import Reply

#: The schedule's eight attempts and a 1 s timeout, over real HTTPS.
pytestmark = pytest.mark.timeout(120)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _hook(rig, node, tenant_id, host="hooks.example.com", port=None):
    url = f"https://{host}:{port or rig.https_receiver.number}/hook"
    row, secret = await node.registry.create(tenant_id, new_webhook({"endpoint": url, "events": ["domain.updated"]}))
    return row, secret


@attrs.frozen
class Member:
    """A member signed in to the dashboard, a dispatching node and one webhook of the member's account."""

    session: object
    tenant_id: uuid.UUID
    node: object
    hook: dict
    secret: str


async def _member_with_hook(api, rig) -> Member:
    tenant, _, session = await signed_in(api)
    tenant_id = uuid.UUID(tenant["id"])
    node = rig.node()
    hook, secret = await _hook(rig, node, tenant_id)
    return Member(session, tenant_id, node, hook, secret)


def _catch_up(rig) -> None:
    """The rig's clock to past the wall clock, which the node serving the dashboard keeps: a
    delivery it made due is due for the rig's dispatcher."""
    rig.clock.advance(max(0.0, time.time() - rig.clock.seconds()) + 1)


async def _deliveries(session, webhook_id) -> dict:
    code, body, _ = await session.json("GET", f"/dashboard/webhooks/{webhook_id}/deliveries")
    assert code == 200, body
    return body


async def _retry(session, webhook_id, event_id):
    return await session.json("POST", f"/dashboard/webhooks/{webhook_id}/deliveries/{event_id}/retry")


def _verify(secret: str, request) -> dict:
    svix_headers = {k: v for k, v in request.headers.items() if k.startswith("svix-")}
    standard = {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    svix.webhooks.Webhook(secret).verify(request.body, svix_headers)
    return standardwebhooks.Webhook(secret).verify(request.body, standard)


def _signed_by(secret: str, request) -> bool:
    """One of the request's signatures is the secret's over its id, timestamp and body (a
    timestamp the libraries' verify would find too far from the wall clock)."""
    headers = request.headers
    expected = standardwebhooks.Webhook(secret).sign(
        headers["webhook-id"], datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC), request.body.decode())
    return expected in headers["webhook-signature"].split(" ")


@pt.ensureDeferred
async def test_each_attempt_is_kept_with_its_status_duration_answer_and_error(api, rig):
    member = await _member_with_hook(api, rig)
    session, tenant_id, node, row = member.session, member.tenant_id, member.node, member.hook
    # 2 KB is kept: the cut after byte 2048 falls inside the é, which is left out.
    long_answer = b"boom\x00" + b"x" * 2042 + "é".encode() + b"y" * 500
    rig.receiver.replies = [Reply(500, {}, long_answer), Reply(200, {}, b"ok")]
    event_id = await rig.event(tenant_id=tenant_id)
    await node.run()
    rig.clock.advance(RETRY_DELAYS[0])
    await node.run()
    assert len(rig.received) == 2

    body = await _deliveries(session, row["id"])
    (delivery,) = body["data"]
    assert (delivery["event_id"], delivery["state"], delivery["attempts"]) == (str(event_id), "delivered", 2)
    first, second = delivery["attempts_made"]
    assert (first["attempt"], first["status"], first["error"]) == (1, 500, "http_5xx")
    assert first["response"] == "boom\ufffd" + "x" * 2042  # a NUL is kept as U+FFFD
    assert (second["attempt"], second["status"], second["error"], second["response"]) == (2, 200, None, "ok")
    for made in (first, second):
        assert made["duration_ms"] >= 0 and made["detail"] == ""
        assert datetime.fromisoformat(made["at"].replace("+00", "+00:00"))
    assert first["at"] < second["at"]
    # The endpoint's last 24 hours: one delivery delivered, one attempt of two a success.
    assert body["last_24_hours"] == {"delivered": 1, "attempted": 1, "succeeded": 1, "made": 2}


@pt.ensureDeferred
async def test_attempts_without_an_answer_say_why_in_kinds(api, rig, dns_server):
    tenant, _, session = await signed_in(api)
    tenant_id = uuid.UUID(tenant["id"])
    maker = rig.node()  # its own resolver's cache: the delivering node looks names up afresh
    node = rig.node(timeout_seconds=1)
    dns_server.a("wrong-name.example.com", "127.0.0.1")  # the receiver's certificate does not hold it
    dns_server.a("gone.example.com", "127.0.0.1")
    closed, _ = await _hook(rig, maker, tenant_id, port=_closed_port())
    slow, _ = await _hook(rig, maker, tenant_id, port=rig.https_receiver.number)
    wrong, _ = await _hook(rig, maker, tenant_id, host="wrong-name.example.com")
    gone, _ = await _hook(rig, maker, tenant_id, host="gone.example.com")
    dns_server.remove("gone.example.com")
    rig.receiver.default = Reply(stall=True)
    await rig.event(tenant_id=tenant_id)
    await node.run()

    found = {}
    for hook in (closed, slow, wrong, gone):
        (delivery,) = (await _deliveries(session, hook["id"]))["data"]
        assert (delivery["state"], delivery["attempts"], delivery["response_status"]) == ("pending", 1, None)
        assert delivery["next_attempt_at"] is not None and delivery["in_flight"] is False
        (made,) = delivery["attempts_made"]
        assert made["status"] is None and made["response"] == "" and made["detail"]
        found[hook["id"]] = made
    assert found[closed["id"]]["error"] == "refused"
    assert "ConnectionRefusedError" in found[closed["id"]]["detail"]
    assert found[slow["id"]]["error"] == "timeout"
    assert found[slow["id"]]["duration_ms"] >= 900  # the 1 s timeout, measured on the wall clock
    assert found[wrong["id"]]["error"] == "tls"
    assert found[gone["id"]]["error"] == "dns"
    rows = await rig.db.fetchall("SELECT error FROM webhook_attempts WHERE tenant_id = %s ORDER BY error",
                                 (tenant_id,))
    assert [r["error"] for r in rows] == ["dns", "refused", "timeout", "tls"]


@pt.ensureDeferred
async def test_retry_now_sends_a_pending_delivery_at_once_with_its_id_and_a_new_signature(api, rig):
    member = await _member_with_hook(api, rig)
    session, tenant_id, node, row, secret = member.session, member.tenant_id, member.node, member.hook, member.secret
    rig.receiver.replies = [Reply(500, {}, b"down")]
    event_id = await rig.event(tenant_id=tenant_id)
    await node.run()
    (before,) = (await _deliveries(session, row["id"]))["data"]
    assert before["state"] == "pending"
    rig.clock.advance(2)  # a retry's timestamp differs from the first attempt's

    code, body, _ = await _retry(session, row["id"], event_id)
    assert code == 200, body
    assert (body["object"], body["event_id"], body["state"], body["attempts"]) == (
        "webhook_delivery", str(event_id), "pending", 1)
    _catch_up(rig)
    await node.run()  # well before the 5 s the schedule said
    assert len(rig.received) == 2
    first, retried = rig.received
    assert retried.headers["webhook-id"] == first.headers["webhook-id"] == "evt_" + event_id.hex
    assert retried.body == first.body
    assert int(retried.headers["webhook-timestamp"]) > int(first.headers["webhook-timestamp"])
    assert retried.headers["webhook-signature"] != first.headers["webhook-signature"]
    assert _verify(secret, retried)["type"] == "domain.updated"
    (after,) = (await _deliveries(session, row["id"]))["data"]
    assert after["state"] == "delivered" and [a["status"] for a in after["attempts_made"]] == [500, 204]

    # Retried, it was delivered: a delivered one is not retried (and nothing is counted).
    code, body, _ = await _retry(session, row["id"], event_id)
    assert code == 409 and "delivered already" in body["message"], body
    # The retry is in the audit log: who, which webhook, which event.
    entries = await rig.db.fetchall("SELECT actor, action, detail FROM audit_log WHERE action = %s", (RETRY_ACTION,))
    assert entries == [{"actor": f"user:{session.user['id']}", "action": RETRY_ACTION, "detail": {
        "tenant_id": str(tenant_id), "webhook_id": str(row["id"]), "event_id": str(event_id), "was": "pending",
        "attempts": 1}}]


@pt.ensureDeferred
async def test_retry_now_gives_a_failed_delivery_one_more_attempt(api, rig):
    member = await _member_with_hook(api, rig)
    session, tenant_id, node, row, secret = member.session, member.tenant_id, member.node, member.hook, member.secret
    rig.receiver.default = Reply(503, {}, b"still down")
    event_id = await rig.event(tenant_id=tenant_id)
    await node.run()
    for delay in RETRY_DELAYS:
        rig.clock.advance(delay)
        await node.run()
    (failed,) = (await _deliveries(session, row["id"]))["data"]
    assert (failed["state"], failed["attempts"], len(failed["attempts_made"])) == ("failed", 8, 8)

    code, body, _ = await _retry(session, row["id"], event_id)
    assert code == 200 and body["attempts"] == 8, body
    rig.clock.advance(1)  # the rig's clock is past the wall clock already (the schedule's hours)
    await node.run()
    assert len(rig.received) == 9
    last = rig.received[-1]
    assert last.headers["webhook-id"] == "evt_" + event_id.hex and last.body == rig.received[0].body
    assert int(last.headers["webhook-timestamp"]) > int(rig.received[-2].headers["webhook-timestamp"])
    assert _signed_by(secret, last)
    (again,) = (await _deliveries(session, row["id"]))["data"]
    # One more attempt, not another schedule: failed again, its ninth attempt kept.
    assert (again["state"], again["attempts"], again["next_attempt_at"]) == ("failed", 9, None)
    assert [a["attempt"] for a in again["attempts_made"]] == list(range(1, 10))
    assert {a["error"] for a in again["attempts_made"]} == {"http_5xx"}


@pt.ensureDeferred
async def test_a_disabled_webhooks_delivery_is_not_retried_and_it_receives_nothing(api, rig):
    member = await _member_with_hook(api, rig)
    session, tenant_id, node, row = member.session, member.tenant_id, member.node, member.hook
    rig.receiver.default = Reply(500)
    event_id = await rig.event(tenant_id=tenant_id)
    await node.run()
    code, _, _ = await session.json("PATCH", f"/dashboard/webhooks/{row['id']}", json={"status": "disabled"})
    assert code == 200

    code, body, _ = await _retry(session, row["id"], event_id)
    assert code == 409 and body["name"] == "conflict", body
    assert "disabled" in body["message"] and "Enable it first" in body["message"]
    _catch_up(rig)
    await node.run()
    assert len(rig.received) == 1
    assert await rig.db.fetchall("SELECT 1 FROM audit_log WHERE action = %s", (RETRY_ACTION,)) == []
    # Nothing of another account, and nothing that is no delivery.
    other, _, other_session = await signed_in(api, "other@example.com")
    code, body, _ = await _retry(other_session, row["id"], event_id)
    assert code == 404 and body["message"] == "Webhook not found"
    code, body, _ = await _retry(session, row["id"], uuid.uuid4())
    assert code == 409  # still disabled: no delivery is looked at
    code, _, _ = await session.json("PATCH", f"/dashboard/webhooks/{row['id']}", json={"status": "enabled"})
    code, body, _ = await _retry(session, row["id"], uuid.uuid4())
    assert code == 404 and body["message"] == "Webhook delivery not found"
    code, body, _ = await _retry(session, row["id"], "not-an-id")
    assert code == 404
    # A retry is a state change: it takes the session's CSRF token.
    code, body, _ = await session.json("POST", f"/dashboard/webhooks/{row['id']}/deliveries/{event_id}/retry",
                                       csrf=False)
    assert code == 403


@pt.ensureDeferred
async def test_retries_are_capped_per_account(api, rig):
    member = await _member_with_hook(api, rig)
    session, tenant_id, node, row = member.session, member.tenant_id, member.node, member.hook
    rig.receiver.default = Reply(500)
    event_id = await rig.event(tenant_id=tenant_id)
    await node.run()
    # A refusal is not counted.
    assert (await _retry(session, row["id"], uuid.uuid4()))[0] == 404
    for _ in range(RETRIES_PER_HOUR):
        code, body, _ = await _retry(session, row["id"], event_id)
        assert code == 200, body
    code, body, response = await _retry(session, row["id"], event_id)
    assert code == 429 and body["name"] == "rate_limit_exceeded", body
    assert f"at most {RETRIES_PER_HOUR} webhook deliveries an hour" in body["message"]
    wait = int(response.headers.getRawHeaders("retry-after")[0])
    assert 0 < wait <= 3600 / RETRIES_PER_HOUR + 1
    entries = await rig.db.fetchall("SELECT 1 FROM audit_log WHERE action = %s", (RETRY_ACTION,))
    assert len(entries) == RETRIES_PER_HOUR
    # Another account has its own cap.
    other, _, other_session = await signed_in(api, "other@example.com")
    other_hook, _ = await _hook(rig, node, uuid.UUID(other["id"]))
    other_event = await rig.event(tenant_id=uuid.UUID(other["id"]))
    await node.run()
    assert (await _retry(other_session, other_hook["id"], other_event))[0] == 200


@pt.ensureDeferred
async def test_no_api_key_surface_retries_and_the_document_names_only_the_dashboards(api, rig):
    tenant, key, session = await signed_in(api)
    node = rig.node()
    row, _ = await _hook(rig, node, uuid.UUID(tenant["id"]))
    event_id = await rig.event(tenant_id=uuid.UUID(tenant["id"]))
    for path in (f"/webhooks/{row['id']}/deliveries/{event_id}/retry",
                 f"/v1/webhooks/{row['id']}/deliveries/{event_id}/retry",
                 f"/webhooks/{row['id']}/deliveries", f"/v1/webhooks/{row['id']}/deliveries"):
        code, _, _ = await api.json("POST", path, key)
        assert code in (404, 405), path
    # The session's retry takes no API key either.
    code, _, _ = await api.json("POST", f"/dashboard/webhooks/{row['id']}/deliveries/{event_id}/retry", key)
    assert code == 401
    mounted = [m for m in api.parts.router.mounted
               if "webhooks" in m.path and ("retry" in m.path or "attempt" in m.path or "replay" in m.path)]
    assert [(m.method, m.path, m.access) for m in mounted] == [
        ("POST", "/dashboard/webhooks/<webhook_id>/deliveries/<event_id>/retry", "session")]
    code, doc, _ = await api.json("GET", "/openapi.json")
    retrying = {path: item for path, item in doc["paths"].items() if "webhooks" in path and "retry" in path}
    assert list(retrying) == ["/dashboard/webhooks/{webhook_id}/deliveries/{event_id}/retry"]
    operation = retrying["/dashboard/webhooks/{webhook_id}/deliveries/{event_id}/retry"]["post"]
    assert operation["tags"] == ["dashboard"]
    assert operation["security"] == [{"sessionCookie": [], "csrfToken": []}]
