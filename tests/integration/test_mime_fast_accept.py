"""
The accept statement (one statement per request: emails, deliveries, attachments, events,
the idempotency outcome and the quota charge): quotas hold under concurrent sends, a refusal
leaves nothing behind, values are stored exactly, and a batch looks each sending domain up once.
"""

import base64

import pytest_twisted as pt
from twisted.internet import defer

from tests.helpers.sending import BODY, sending_tenant


@pt.ensureDeferred
async def test_concurrent_sends_never_pass_the_quota(api):
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"daily_quota": 7})
    results = await defer.gatherResults([
        defer.ensureDeferred(api.json("POST", "/emails", key, json={**BODY, "to": f"r{i}@example.com"}))
        for i in range(12)])
    codes = sorted(code for code, _, _ in results)
    assert codes == [200] * 7 + [429] * 5
    assert all(body["name"] == "daily_quota_exceeded" for code, body, _ in results if code == 429)
    counts = await api.parts.db.fetchone(
        "SELECT (SELECT count(*) FROM emails) AS emails, (SELECT count(*) FROM deliveries) AS deliveries,"
        " (SELECT count(*) FROM events WHERE type = 'email.sent') AS sent,"
        " (SELECT sum(count) FROM usage WHERE period LIKE 'day:%%') AS day,"
        " (SELECT sum(count) FROM usage WHERE period LIKE 'month:%%') AS month")
    assert counts == {"emails": 7, "deliveries": 7, "sent": 7, "day": 7, "month": 7}


@pt.ensureDeferred
async def test_a_refused_charge_leaves_nothing_and_frees_the_idempotency_key(api):
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"monthly_quota": 1})
    code, body, _ = await api.json("POST", "/emails", key, json={
        **BODY, "to": ["a@example.com", "b@example.com"],
        "attachments": [{"filename": "a.txt", "content": base64.b64encode(b"x").decode()}]},
        headers={"Idempotency-Key": "k1"})
    assert (code, body["name"]) == (429, "monthly_quota_exceeded")
    counts = await api.parts.db.fetchone(
        "SELECT (SELECT count(*) FROM emails) AS emails, (SELECT count(*) FROM attachments) AS attachments,"
        " (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM events) AS events,"
        " (SELECT count(*) FROM usage) AS usage")
    assert counts == {"emails": 0, "attachments": 0, "deliveries": 0, "events": 0, "usage": 0}
    # A 429 frees the key: the same request runs again (refused again, not replayed), and once
    # the quota allows it, the key keeps its first success.
    again = {**BODY, "to": ["a@example.com", "b@example.com"],
             "attachments": [{"filename": "a.txt", "content": base64.b64encode(b"x").decode()}]}
    code2, body2, response = await api.json("POST", "/emails", key, json=again, headers={"Idempotency-Key": "k1"})
    assert (code2, body2) == (code, body) and response.headers.getRawHeaders("idempotent-replayed") is None
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"monthly_quota": 10})
    code3, sent, _ = await api.json("POST", "/emails", key, json=again, headers={"Idempotency-Key": "k1"})
    code4, replayed, response = await api.json("POST", "/emails", key, json=again, headers={"Idempotency-Key": "k1"})
    assert (code3, code4, replayed) == (200, 200, sent)
    assert response.headers.getRawHeaders("idempotent-replayed") == ["true"]


@pt.ensureDeferred
async def test_values_are_stored_as_sent(api):
    _, key, _ = await sending_tenant(api)
    odd = "100% sure %s %(name)s \\ ' \" \u00e9\u65e5\U0001f389"
    code, sent, _ = await api.json("POST", "/emails", key, json={
        **BODY, "subject": odd, "html": f"<p>{odd}</p>", "text": odd, "tags": [{"name": "k", "value": "v"}],
        "headers": {"X-Odd": odd}, "attachments": [{"filename": f"{odd}.txt", "content": "aGk="}]},
        headers={"Idempotency-Key": odd})
    assert code == 200, sent
    _, got, _ = await api.json("GET", f"/emails/{sent['id']}", key)
    assert (got["subject"], got["html"], got["text"]) == (odd, f"<p>{odd}</p>", odd)
    attachment = await api.parts.db.fetchone("SELECT filename, content FROM attachments")
    assert (attachment["filename"], bytes(attachment["content"])) == (f"{odd}.txt", b"hi")
    event = await api.parts.db.fetchone("SELECT data FROM events WHERE type = 'email.sent'")
    assert event["data"]["subject"] == odd and event["data"]["tags"] == [{"name": "k", "value": "v"}]
    _, replayed, response = await api.json("POST", "/emails", key, json={
        **BODY, "subject": odd, "html": f"<p>{odd}</p>", "text": odd, "tags": [{"name": "k", "value": "v"}],
        "headers": {"X-Odd": odd}, "attachments": [{"filename": f"{odd}.txt", "content": "aGk="}]},
        headers={"Idempotency-Key": odd})
    assert replayed == sent and response.headers.getRawHeaders("idempotent-replayed") == ["true"]


@pt.ensureDeferred
async def test_a_batch_looks_each_sending_domain_up_once(api, monkeypatch):
    from mailsvc.store import domains as store

    _, key, _ = await sending_tenant(api, plan="growth")
    code, other, _ = await api.json("POST", "/domains", key, json={"name": "second.example.com"})
    assert code in (200, 201), other
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (other["id"],))
    lookups = []
    original = store.signing_keys

    async def counted(db, tenant_id, name):
        lookups.append(name)
        return await original(db, tenant_id, name)

    monkeypatch.setattr(store, "signing_keys", counted)
    batch = [{**BODY, "to": f"r{i}@example.com",
              "from": "a@second.example.com" if i % 3 == 0 else "Acme <news@ACME.example.com>"} for i in range(30)]
    code, body, _ = await api.json("POST", "/emails/batch", key, json=batch)
    assert code == 200 and len(body["data"]) == 30
    assert sorted(lookups) == ["acme.example.com", "second.example.com"]
    rows = await api.parts.db.fetchall(
        "SELECT e.id, count(d.id) AS n FROM emails e JOIN deliveries d ON d.email_id = e.id GROUP BY e.id")
    assert len(rows) == 30 and all(r["n"] == 1 for r in rows)
    assert [e["id"] for e in body["data"]] == sorted(e["id"] for e in body["data"])  # ids in order (UUIDv7)
