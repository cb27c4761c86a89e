"""The delivery queue in the operator's hands: a queue of deferred mail across
destinations and tenants (the loopback sink answering 4xx), through the summary, the list and
every action, with their events, the audit log and named operator tokens."""

import pytest_twisted as pt
from twisted.internet import reactor
from twisted.internet.task import Clock, deferLater

from mailsvc import timefmt
from mailsvc.app.audit import CONFIGURED_TOKEN_NAME, AuditLog
from mailsvc.app.queue import SUMMARY_MAX_AGE, Queue
from mailsvc.domain.queue import QueueFilter
from mailsvc.store import webhooks
from tests.helpers.dashboard import signed_in
from tests.helpers.sending import sending_tenant
from tests.helpers.smtpsink import smtp_sink  # noqa: F401 (a fixture)

OTHER = "other.example.com"


async def deferred_queue(mta) -> dict:
    """Tenant A: ann@a.example, bob@ and ben@b.example; tenant B: cat@b.example, dan@c.example;
    every recipient answered 4xx, so that every delivery is deferred."""
    for domain in ("a.example", "b.example", "c.example"):
        mta.route(domain)
    for rcpt in ("ann@a.example", "bob@b.example", "ben@b.example", "cat@b.example"):
        mta.sink.rcpt_replies[rcpt] = b"451 4.7.1 greylisted, try again later"
    mta.sink.rcpt_replies["dan@c.example"] = b"452 4.2.2 mailbox full"
    tenant_a, key_a = await mta.sender(name="Alpha Mail")
    tenant_b, key_b, _ = await sending_tenant(mta, OTHER, name="Beta Mail")
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant_b['id']}", mta.operator_token,
                   json={"send_rate_per_sec": 1000})
    emails = {
        "a": await mta.send(key_a, ["ann@a.example", "bob@b.example", "ben@b.example"]),
        "b": await mta.send(key_b, ["cat@b.example", "dan@c.example"], **{"from": f"Beta <news@{OTHER}>"}),
    }
    for email_id in emails.values():
        rows = await mta.settled_past(email_id)
        assert {r["status"] for r in rows} == {"deferred"}, rows
    return {"a": tenant_a, "b": tenant_b, "key_a": key_a, "key_b": key_b, "emails": emails}


async def row_of(mta, recipient: str) -> dict:
    return await mta.parts.db.fetchone(
        "SELECT id, status, attempts, due_at, retry_until, held_reason, email_id FROM deliveries"
        " WHERE recipient = %s ORDER BY id DESC LIMIT 1", (recipient,))


async def until(condition, what: str):
    for _ in range(100):
        found = await condition()
        if found:
            return found
        await deferLater(reactor, 0.05, lambda: None)
    raise AssertionError(what)


@pt.ensureDeferred
async def test_the_summary_the_list_and_retry_now(mta):
    queue = await deferred_queue(mta)
    code, summary, _ = await mta.json("GET", "/admin/v1/queue", mta.operator_token)
    assert code == 200 and summary["object"] == "queue_summary"
    states = {s["state"]: s["count"] for s in summary["by_state"]}
    assert states == {"due": 0, "deferred": 5, "in_flight": 0, "held": 0}
    assert [(d["destination"], d["count"]) for d in summary["by_destination"]] == [
        ("b.example", 3), ("a.example", 1), ("c.example", 1)]
    b = summary["by_destination"][0]
    # The MX each destination resolves to, as delivery resolves it: looked up for the next read,
    # never waited for (a DNS that does not answer leaves it null and the summary as fast).
    assert [d["mx"] for d in summary["by_destination"]] == [None, None, None]

    async def mx_shown():
        _, again, _ = await mta.json("GET", "/admin/v1/queue", mta.operator_token)
        return [d["mx"] for d in again["by_destination"]] == ["mx.b.example", "mx.a.example", "mx.c.example"]

    await until(mx_shown, "the destinations' MX in the summary")
    assert b["states"]["deferred"] == 3 and b["hold"] is None and b["next_attempt_at"].endswith("Z")
    assert b["top_responses"][0]["code"] == 451 and b["top_responses"][0]["count"] == 3
    assert "greylisted" in b["top_responses"][0]["text"]
    by_tenant = {t["tenant_name"]: t for t in summary["by_tenant"]}
    assert by_tenant["Alpha Mail"]["count"] == 3 and by_tenant["Beta Mail"]["count"] == 2
    assert by_tenant["Beta Mail"]["tenant_id"] == queue["b"]["id"]
    assert {r["code"] for r in by_tenant["Beta Mail"]["top_responses"]} == {451, 452}

    code, listed, _ = await mta.json("GET", "/admin/v1/queue/deliveries?destination=b.example", mta.operator_token)
    assert code == 200 and {r["recipient"] for r in listed["data"]} == {"bob@b.example", "ben@b.example",
                                                                        "cat@b.example"}
    row = listed["data"][0]
    assert row["object"] == "queued_delivery" and row["state"] == "deferred" and row["attempts"] == 1
    assert row["last_response"]["code"] == 451 and row["held_reason"] is None
    code, listed, _ = await mta.json(
        "GET", f"/admin/v1/queue/deliveries?tenant_id={queue['b']['id']}&code=452", mta.operator_token)
    assert [r["recipient"] for r in listed["data"]] == ["dan@c.example"]
    _, first, _ = await mta.json("GET", "/admin/v1/queue/deliveries?limit=2", mta.operator_token)
    _, rest, _ = await mta.json("GET", f"/admin/v1/queue/deliveries?limit=10&after={first['data'][-1]['id']}",
                                mta.operator_token)
    assert first["has_more"] and not rest["has_more"]
    assert len({r["id"] for r in first["data"] + rest["data"]}) == 5
    for query in ("state=stuck", "code=abc", "tenant_id=nope", "min_age_seconds=-1", "destination=a%00b"):
        code, body, _ = await mta.json("GET", f"/admin/v1/queue/deliveries?{query}", mta.operator_token)
        assert code == 422 and body["error"]["field"] == query.split("=")[0], query
    _, young, _ = await mta.json("GET", "/admin/v1/queue/deliveries?min_age_seconds=3600", mta.operator_token)
    assert young["data"] == []

    # Retry now: due at once (the sink takes it now), attempts and the retry window untouched.
    before = await row_of(mta, "dan@c.example")
    del mta.sink.rcpt_replies["dan@c.example"]
    code, done, _ = await mta.json("POST", "/admin/v1/queue/retry", mta.operator_token,
                                   json={"destination": "c.example"})
    assert (code, done) == (200, {"object": "queue_action", "action": "retry", "count": 1})
    mta.parts.delivery.wake()
    await mta.sink.wait_for(1)
    await mta.settled()
    after = await row_of(mta, "dan@c.example")
    assert after["status"] == "delivered" and after["attempts"] == before["attempts"] + 1
    assert after["retry_until"] == before["retry_until"]

    for body in ({}, {"ids": []}, {"ids": [before["id"].hex], "destination": "c.example"}):
        code, reply, _ = await mta.json("POST", "/admin/v1/queue/retry", mta.operator_token, json=body)
        assert code == 422 and reply["error"]["field"] == "ids", body
    _, audit, _ = await mta.json("GET", "/admin/v1/audit", mta.operator_token)
    (entry,) = [e for e in audit["data"] if e["action"] == "queue.retry"]
    assert entry["actor"] == CONFIGURED_TOKEN_NAME and entry["filter"] == {"destination": "c.example"}
    assert entry["count"] == 1 and entry["at"].endswith("Z")


@pt.ensureDeferred
async def test_hold_release_and_bounce_by_a_named_operator(mta):
    queue = await deferred_queue(mta)
    code, made, _ = await mta.json("POST", "/admin/v1/operator-tokens", mta.operator_token, json={"name": "alice"})
    assert code == 201 and made["object"] == "operator_token" and made["name"] == "alice"
    alice = made["token"]
    code, again, _ = await mta.json("POST", "/admin/v1/operator-tokens", alice, json={"name": "alice"})
    assert code == 409
    events_before = len(await mta.events("email.delivery_delayed"))

    # A hold on a destination: its deliveries held, no event, no last_event; new mail too.
    code, done, _ = await mta.json("POST", "/admin/v1/queue/hold", alice,
                                   json={"destination": "b.example", "reason": "b.example is refusing us"})
    assert (code, done["action"], done["count"]) == (200, "hold", 3)
    code, reply, _ = await mta.json("POST", "/admin/v1/queue/hold", alice, json={"destination": "b.example"})
    assert code == 422 and reply["error"]["field"] == "reason"
    assert (await row_of(mta, "bob@b.example"))["held_reason"] == "b.example is refusing us"
    _, summary, _ = await mta.json("GET", "/admin/v1/queue", alice)
    (hold,) = summary["holds"]
    assert (hold["kind"], hold["value"], hold["created_by"]) == ("destination", "b.example", "alice")
    b = next(d for d in summary["by_destination"] if d["destination"] == "b.example")
    assert b["states"]["held"] == 3 and b["hold"]["reason"] == "b.example is refusing us"
    assert len(await mta.events("email.delivery_delayed")) == events_before
    code, got, _ = await mta.json("GET", f"/emails/{queue['emails']['a']}", queue["key_a"])
    assert got["last_event"] == "delivery_delayed"
    _, retried, _ = await mta.json("POST", "/admin/v1/queue/retry", alice, json={"destination": "b.example"})
    assert retried["count"] == 0  # held deliveries stay held

    for rcpt in ("bob@b.example", "ben@b.example", "cat@b.example"):
        del mta.sink.rcpt_replies[rcpt]
    await mta.send(queue["key_a"], ["new@b.example"])

    async def new_is_held():
        await mta.settled()
        row = await row_of(mta, "new@b.example")
        return row if row and row["held_reason"] else None

    new = await until(new_is_held, "a standing hold catches new mail")
    assert new["status"] == "queued" and new["attempts"] == 0 and mta.sink.messages == []

    # Release after the retry window: email.failed retry_window_exhausted; the rest leave.
    ben = await row_of(mta, "ben@b.example")
    await mta.parts.db.execute("UPDATE deliveries SET retry_until = now() - interval '1 minute' WHERE id = %s",
                               (ben["id"],))
    code, done, _ = await mta.json("POST", "/admin/v1/queue/release", alice, json={"destination": "b.example"})
    assert (code, done["action"], done["count"]) == (200, "release", 4)
    (failed,) = await mta.events("email.failed")
    assert failed["reason"] == "retry_window_exhausted" and failed["recipient"] == "ben@b.example"
    mta.parts.delivery.wake()
    await mta.sink.wait_for(3)
    await mta.settled()
    assert sorted(r for m in mta.sink.messages for r in m.rcpt_to) == [
        "bob@b.example", "cat@b.example", "new@b.example"]
    _, summary, _ = await mta.json("GET", "/admin/v1/queue", alice)
    assert summary["holds"] == []

    # A delivery in flight is left to its attempt.
    dan = await row_of(mta, "dan@c.example")
    await mta.parts.db.execute("UPDATE deliveries SET claimed_until = now() + interval '1 hour' WHERE id = %s",
                               (dan["id"],))
    _, none, _ = await mta.json("POST", "/admin/v1/queue/bounce", alice, json={"ids": [str(dan["id"])]})
    assert none["count"] == 0
    await mta.parts.db.execute("UPDATE deliveries SET claimed_until = NULL WHERE id = %s", (dan["id"],))

    # Bounce: email.failed content_expired, the row kept, the recipient not suppressed.
    code, done, _ = await mta.json("POST", "/admin/v1/queue/bounce", alice,
                                   json={"tenant_id": queue["b"]["id"], "destination": "c.example"})
    assert (code, done["action"], done["count"]) == (200, "bounce", 1)
    dan = await row_of(mta, "dan@c.example")
    assert dan["status"] == "failed" and dan["due_at"] is None
    expired = [e for e in await mta.events("email.failed") if e["reason"] == "content_expired"]
    assert [e["recipient"] for e in expired] == ["dan@c.example"]
    code, _, _ = await mta.json("GET", "/suppressions/dan@c.example", queue["key_b"])
    assert code == 404
    _, got, _ = await mta.json("GET", f"/emails/{queue['emails']['b']}", queue["key_b"])
    assert got["last_event"] == "failed"
    _, summary, _ = await mta.json("GET", "/admin/v1/queue", alice)
    assert {s["state"]: s["count"] for s in summary["by_state"]}["deferred"] == 1  # ann@a.example

    # Each action in the audit log under the token's name; the token listed, then revoked.
    _, audit, _ = await mta.json("GET", "/admin/v1/audit?limit=100", alice)
    queue_actions = [(e["action"], e["actor"], e["count"]) for e in reversed(audit["data"])
                     if e["action"].startswith("queue.")]
    assert queue_actions == [("queue.hold", "alice", 3), ("queue.retry", "alice", 0),
                             ("queue.release", "alice", 4), ("queue.bounce", "alice", 0),
                             ("queue.bounce", "alice", 1)]
    hold_entry = next(e for e in audit["data"] if e["action"] == "queue.hold")
    assert hold_entry["filter"] == {"destination": "b.example"}
    assert hold_entry["detail"] == {"reason": "b.example is refusing us"}
    _, tokens, _ = await mta.json("GET", "/admin/v1/operator-tokens", mta.operator_token)
    (listed,) = tokens["data"]
    assert listed["name"] == "alice" and listed["last_used_at"] is not None and "token" not in listed
    code, deleted, _ = await mta.json("DELETE", f"/admin/v1/operator-tokens/{made['id']}", mta.operator_token)
    assert code == 200 and deleted["deleted"] is True
    code, _, _ = await mta.json("GET", "/admin/v1/queue", alice)
    assert code == 403
    _, audit, _ = await mta.json("GET", "/admin/v1/audit", mta.operator_token)
    made_and_revoked = [(e["action"], e["actor"], e["detail"]["name"]) for e in audit["data"]
                        if e["action"].startswith("operator_token.")]
    assert made_and_revoked == [("operator_token.delete", "operator", "alice"),
                                ("operator_token.create", "operator", "alice")]


@pt.ensureDeferred
async def test_the_tenants_list_and_audited_set_password_links(api):
    for name in ("Acme Corp", "acme labs", "Other 100%"):
        await api.tenant(name=name)
    code, found, _ = await api.json("GET", "/admin/v1/tenants?q=ACME", api.operator_token)
    assert code == 200 and [t["name"] for t in found["data"]] == ["acme labs", "Acme Corp"]
    _, found, _ = await api.json("GET", "/admin/v1/tenants?q=0%25", api.operator_token)
    assert [t["name"] for t in found["data"]] == ["Other 100%"]
    _, found, _ = await api.json("GET", "/admin/v1/tenants?q=_", api.operator_token)
    assert found["data"] == []  # a wildcard of LIKE is a plain character here
    corp = next(t for t in (await api.json("GET", "/admin/v1/tenants", api.operator_token))[1]["data"]
                if t["name"] == "Acme Corp")
    await api.json("PATCH", f"/admin/v1/tenants/{corp['id']}", api.operator_token, json={"status": "paused"})
    _, paused, _ = await api.json("GET", "/admin/v1/tenants?status=paused", api.operator_token)
    assert [t["id"] for t in paused["data"]] == [corp["id"]] and paused["data"][0]["object"] == "tenant"
    _, page, _ = await api.json("GET", "/admin/v1/tenants?limit=2", api.operator_token)
    _, rest, _ = await api.json("GET", f"/admin/v1/tenants?limit=2&after={page['data'][-1]['id']}",
                                api.operator_token)
    assert page["has_more"] and not rest["has_more"] and len(page["data"] + rest["data"]) == 3
    for query in ("status=gone", "q=%00", "q=" + "x" * 201):
        code, body, _ = await api.json("GET", f"/admin/v1/tenants?{query}", api.operator_token)
        assert code == 422 and body["error"]["field"] == query.split("=")[0], query

    _, bob, _ = await api.json("POST", "/admin/v1/operator-tokens", api.operator_token, json={"name": "bob"})
    code, user, _ = await api.json("POST", f"/admin/v1/tenants/{corp['id']}/users", bob["token"],
                                   json={"email": "owner@acme.example"})
    assert code == 201 and user["set_password_url"]
    _, audit, _ = await api.json("GET", "/admin/v1/audit", bob["token"])
    link = audit["data"][0]
    assert (link["action"], link["actor"]) == ("user.link", "bob")
    assert link["detail"] == {"tenant_id": corp["id"], "user_id": user["id"], "email": "owner@acme.example",
                              "role": "owner"}

    # A link issued from the dashboard (an invitation, a reset) is audited under the user who asked.
    tenant, _, owner = await signed_in(api, "boss@example.com")
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "mia@example.com"})
    assert code == 201
    code, _, _ = await owner.json("POST", f"/dashboard/users/{invited['id']}/password-link")
    assert code == 200
    _, audit, _ = await api.json("GET", "/admin/v1/audit?limit=2", api.operator_token)
    assert [(e["action"], e["actor"], e["detail"]["email"]) for e in audit["data"]] == [
        ("user.link", f"user:{owner.user['id']}", "mia@example.com")] * 2


@pt.ensureDeferred
async def test_the_audit_log_is_pruned_with_the_events(db):
    clock = Clock()
    clock.advance(1_800_000_000)
    log = AuditLog(clock, db)
    await log.write("operator", "queue.retry", {"destination": "old.example"}, 1)
    clock.advance(31 * 86400)
    await log.write("operator", "queue.retry", {"destination": "new.example"}, 2)
    await webhooks.prune(db, timefmt.from_seconds(clock.seconds()),
                         timefmt.from_seconds(clock.seconds() - 30 * 86400))
    rows = await db.fetchall("SELECT filter FROM audit_log")
    assert [r["filter"] for r in rows] == [{"destination": "new.example"}]


@pt.ensureDeferred
async def test_a_summary_is_kept_ten_seconds_unless_an_action_changes_the_queue(api):
    _, key, _ = await sending_tenant(api)
    body = {"from": "Acme <news@acme.example.com>", "subject": "Hi", "text": "Hi"}
    clock = Clock()
    clock.advance(reactor.seconds() + 60)  # every delivery accepted below is due by then
    queue = Queue(clock, api.parts.db, AuditLog(clock, api.parts.db))

    async def counts():
        return {s["state"]: s["count"] for s in (await queue.summary())["by_state"] if s["count"]}

    await api.json("POST", "/emails", key, json={**body, "to": ["ann@a.example"]})
    assert await counts() == {"due": 1}
    await api.json("POST", "/emails", key, json={**body, "to": ["bob@a.example"]})
    assert await counts() == {"due": 1}
    clock.advance(SUMMARY_MAX_AGE)
    assert await counts() == {"due": 2}
    assert await queue.hold(QueueFilter(destination="a.example"), "maintenance", "operator") == 2
    assert await counts() == {"held": 2}
