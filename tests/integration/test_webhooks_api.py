"""The webhook management API: the official Python SDK, plain HTTP, and the native surface."""

import base64

import attrs
import pytest
import pytest_twisted as pt
import resend
import resend.exceptions
import standardwebhooks

from mailsvc.config import load
from tests.helpers.sdk import call

UNKNOWN = "0190a2b4-0000-7000-8000-000000000000"


def _plain(reply: dict) -> dict:
    """An SDK reply without the response headers the SDK adds."""
    return {k: v for k, v in reply.items() if k != "http_headers"}


@pytest.fixture
def config(dns_server, ca, tmp_path):
    """Names resolve through the test DNS server; private targets are refused (the default)."""
    dns_server.a("hooks.example.com", "8.8.8.8")
    dns_server.a("other.example.com", "8.8.4.4")
    dns_server.a("inside.example.com", "10.1.2.3")
    dns_server.aaaa("sneaky.example.com", "::ffff:192.168.0.1")
    dns_server.cname("alias.example.com", "inside.example.com")
    base = dns_server.configure(load(None, environ={}))
    return attrs.evolve(base, security=attrs.evolve(base.security, ca_file=ca.write(tmp_path / "ca.pem")))


@pt.ensureDeferred
async def test_the_whole_lifecycle_with_the_sdk(api):
    _, key = await api.tenant()
    created = await call(api, key, resend.Webhooks.create, {
        "endpoint": "https://hooks.example.com/mail", "events": ["email.sent", "email.bounced"],
    })
    assert created["object"] == "webhook"
    secret = created["signing_secret"]
    assert secret.startswith("whsec_") and len(secret) == 6 + 32
    assert len(base64.b64decode(secret[6:])) == 24
    standardwebhooks.Webhook(secret)  # every verifier accepts its spelling

    listed = await call(api, key, resend.Webhooks.list)
    assert listed["object"] == "list" and listed["has_more"] is False
    (item,) = listed["data"]
    assert set(item) == {"id", "endpoint", "events", "status", "created_at"}
    assert item == {
        "id": created["id"], "endpoint": "https://hooks.example.com/mail",
        "events": ["email.sent", "email.bounced"], "status": "enabled", "created_at": item["created_at"],
    }
    assert item["created_at"].endswith("+00") and len(item["created_at"]) == len("2026-01-01 00:00:00.000000+00")

    got = await call(api, key, resend.Webhooks.get, created["id"])
    assert _plain(got) == {"object": "webhook", **item, "signing_secret": secret}

    updated = await call(api, key, resend.Webhooks.update, {
        "webhook_id": created["id"], "status": "disabled", "endpoint": "https://other.example.com/x",
        "events": ["domain.updated"],
    })
    assert _plain(updated) == {"object": "webhook", "id": created["id"]}
    got = await call(api, key, resend.Webhooks.get, created["id"])
    assert (got["status"], got["endpoint"]) == ("disabled", "https://other.example.com/x")
    assert got["events"] == ["domain.updated"]
    await call(api, key, resend.Webhooks.update, {"webhook_id": created["id"], "status": "enabled"})
    got = await call(api, key, resend.Webhooks.get, created["id"])
    assert (got["status"], got["events"]) == ("enabled", ["domain.updated"])  # other fields kept

    rotated = await call(api, key, resend.Webhooks.rotate_signing_secret, created["id"])
    assert rotated["object"] == "webhook" and rotated["id"] == created["id"]
    assert rotated["signing_secret"].startswith("whsec_") and rotated["signing_secret"] != secret
    got = await call(api, key, resend.Webhooks.get, created["id"])
    assert got["signing_secret"] == rotated["signing_secret"]

    removed = await call(api, key, resend.Webhooks.remove, created["id"])
    assert _plain(removed) == {"object": "webhook", "id": created["id"], "deleted": True}
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, key, resend.Webhooks.get, created["id"])
    assert (e.value.code, e.value.error_type) == (404, "not_found")


@pt.ensureDeferred
async def test_create_answers_201_with_the_webhook_and_its_secret(api):
    _, key = await api.tenant()
    code, body, response = await api.json(
        "POST", "/webhooks", key, json={"endpoint": "https://hooks.example.com/", "events": ["email.opened"]}
    )
    assert code == 201
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    assert set(body) == {"object", "id", "endpoint", "events", "status", "created_at", "signing_secret"}
    assert body["events"] == ["email.opened"]  # accepted, though never sent


@pt.ensureDeferred
async def test_an_account_has_at_most_20_webhooks(api):
    _, key = await api.tenant()
    body = {"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
    created = [await api.json("POST", "/webhooks", key, json=body) for _ in range(20)]
    assert [code for code, _, _ in created] == [201] * 20
    code, refused, _ = await api.json("POST", "/webhooks", key, json=body)
    assert (code, refused["name"]) == (403, "validation_error") and "at most 20 webhooks" in refused["message"]
    await api.json("DELETE", f"/webhooks/{created[0][1]['id']}", key)
    code, _, _ = await api.json("POST", "/v1/webhooks", key, json={**body, "events": ["message.accepted"]})
    assert code == 201
    other, other_key = await api.tenant()
    assert (await api.json("POST", "/webhooks", other_key, json=body))[0] == 201  # per account


@pt.ensureDeferred
async def test_secrets_are_stored_sealed(api):
    _, key = await api.tenant()
    _, body, _ = await api.json(
        "POST", "/webhooks", key, json={"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
    )
    rows = await api.parts.db.fetchall("SELECT * FROM webhooks")
    dump = repr(rows)
    assert body["signing_secret"] not in dump
    assert body["signing_secret"][6:] not in dump
    assert base64.b64decode(body["signing_secret"][6:]).hex() not in bytes(rows[0]["secret"]).hex()


@pt.ensureDeferred
async def test_validation(api):
    _, key = await api.tenant()
    good = {"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
    for body, field in [
        ({"events": ["email.sent"]}, "endpoint"),
        ({**good, "endpoint": ""}, "endpoint"),
        ({**good, "endpoint": 5}, "endpoint"),
        ({**good, "endpoint": "http://hooks.example.com/"}, "endpoint"),
        ({**good, "endpoint": "hooks.example.com"}, "endpoint"),
        ({**good, "endpoint": "https://user:pw@hooks.example.com/"}, "endpoint"),
        ({**good, "endpoint": "https://hooks.example.com:99999/"}, "endpoint"),
        ({**good, "endpoint": "https://hooks.example.com/" + "x" * 2100}, "endpoint"),
        ({"endpoint": "https://hooks.example.com/"}, "events"),
        ({**good, "events": []}, "events"),
        ({**good, "events": "email.sent"}, "events"),
        ({**good, "events": ["email.sent", "email.teleported"]}, "events"),
        ({**good, "events": ["message.accepted"]}, "events"),  # a native name on the main surface
        ({**good, "events": [5]}, "events"),
    ]:
        code, reply, _ = await api.json("POST", "/webhooks", key, json=body)
        assert (code, reply["name"]) == (422, "validation_error"), body
        assert reply["message"].startswith(field), reply
    _, created, _ = await api.json(
        "POST", "/webhooks", key, json={**good, "events": ["email.sent", "email.sent", "domain.updated"]}
    )
    assert created["events"] == ["email.sent", "domain.updated"]
    for body, field in [
        ({"status": "paused"}, "status"),
        ({"events": []}, "events"),
        ({"endpoint": "http://hooks.example.com/"}, "endpoint"),
    ]:
        code, reply, _ = await api.json("PATCH", f"/webhooks/{created['id']}", key, json=body)
        assert (code, reply["name"]) == (422, "validation_error"), body
        assert reply["message"].startswith(field), reply
    code, reply, _ = await api.json("PATCH", f"/webhooks/{created['id']}", key, json={})
    assert (code, reply) == (200, {"object": "webhook", "id": created["id"]})


@pt.ensureDeferred
async def test_endpoints_must_be_public(api):
    _, key = await api.tenant()
    for endpoint in [
        "https://127.0.0.1/",
        "https://[::1]/",
        "https://10.0.0.1/",
        "https://172.16.5.4/",
        "https://192.168.1.1/",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:8.8.8.8]/",
        "https://[fe80::1]/",
        "https://0.0.0.0/",
        "https://inside.example.com/",     # resolves to 10.1.2.3
        "https://alias.example.com/",      # CNAME to it
        "https://sneaky.example.com/",     # AAAA ::ffff:192.168.0.1
        "https://nowhere.example.com/",    # does not resolve
    ]:
        code, reply, _ = await api.json(
            "POST", "/webhooks", key, json={"endpoint": endpoint, "events": ["email.sent"]}
        )
        assert (code, reply["name"]) == (422, "validation_error"), endpoint
        assert reply["message"].startswith("endpoint"), reply
    _, created, _ = await api.json(
        "POST", "/webhooks", key, json={"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
    )
    code, reply, _ = await api.json(
        "PATCH", f"/webhooks/{created['id']}", key, json={"endpoint": "https://inside.example.com/"}
    )
    assert (code, reply["name"]) == (422, "validation_error")
    _, got, _ = await api.json("GET", f"/webhooks/{created['id']}", key)
    assert got["endpoint"] == "https://hooks.example.com/"
    assert (await api.parts.db.fetchone("SELECT count(*) AS n FROM webhooks"))["n"] == 1


@pt.ensureDeferred
async def test_native_surface_uses_native_names(api):
    _, key = await api.tenant()
    code, created, _ = await api.json(
        "POST", "/v1/webhooks", key,
        json={"endpoint": "https://hooks.example.com/n", "events": ["message.delivered", "domain.status_changed"]},
    )
    assert code == 201
    assert created["object"] == "webhook" and created["signing_secret"].startswith("whsec_")
    assert created["events"] == ["message.delivered", "domain.status_changed"]

    code, error, _ = await api.json(
        "POST", "/v1/webhooks", key, json={"endpoint": "https://hooks.example.com/n", "events": ["email.sent"]}
    )
    assert code == 422
    assert error["error"]["code"] == "validation_error" and error["error"]["field"] == "events"
    code, error, _ = await api.json(
        "POST", "/v1/webhooks", key, json={"endpoint": "https://10.0.0.1/", "events": ["message.sent"]}
    )
    assert code == 422 and error["error"]["field"] in ("endpoint", "events")

    code, listed, _ = await api.json("GET", "/v1/webhooks", key)
    assert code == 200 and "signing_secret" not in listed["data"][0]
    assert listed["data"][0]["events"] == ["message.delivered", "domain.status_changed"]
    # One resource, two views: the main surface shows the main names.
    _, main, _ = await api.json("GET", f"/webhooks/{created['id']}", key)
    assert main["events"] == ["email.delivered", "domain.updated"]

    response, body = await api.request("DELETE", f"/v1/webhooks/{created['id']}", key)
    assert (response.code, body) == (204, b"")
    code, error, _ = await api.json("DELETE", f"/v1/webhooks/{created['id']}", key)
    assert code == 404 and error["error"]["code"] == "not_found"


@pt.ensureDeferred
async def test_unknown_or_malformed_ids_are_404(api):
    _, key = await api.tenant()
    for webhook_id in ("nope", UNKNOWN):
        for method, path, body in [
            ("GET", f"/webhooks/{webhook_id}", None),
            ("PATCH", f"/webhooks/{webhook_id}", {"status": "disabled"}),
            ("DELETE", f"/webhooks/{webhook_id}", None),
            ("POST", f"/webhooks/{webhook_id}/signing-secret/rotate", None),
        ]:
            code, reply, _ = await api.json(method, path, key, json=body)
            assert (code, reply["name"], reply["message"]) == (404, "not_found", "Webhook not found"), path


@pt.ensureDeferred
async def test_tenant_isolation_and_access(api):
    _, key_a = await api.tenant(name="A")
    _, key_b = await api.tenant(name="B")
    _, created, _ = await api.json(
        "POST", "/webhooks", key_b, json={"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
    )
    for method, path in [
        ("GET", f"/webhooks/{created['id']}"),
        ("PATCH", f"/webhooks/{created['id']}"),
        ("DELETE", f"/webhooks/{created['id']}"),
        ("POST", f"/webhooks/{created['id']}/signing-secret/rotate"),
        ("DELETE", f"/v1/webhooks/{created['id']}"),
    ]:
        code, _, _ = await api.json(method, path, key_a, json={"status": "disabled"})
        assert code == 404, path
    _, listed, _ = await api.json("GET", "/webhooks", key_a)
    assert listed["data"] == []
    _, sender, _ = await api.json(
        "POST", "/api-keys", key_b, json={"name": "s", "permission": "sending_access"}
    )
    code, reply, _ = await api.json("GET", "/webhooks", sender["token"])
    assert (code, reply["name"]) == (401, "restricted_api_key")


@pt.ensureDeferred
async def test_list_pages_newest_first(api):
    _, key = await api.tenant()
    ids = []
    for _ in range(3):
        _, created, _ = await api.json(
            "POST", "/webhooks", key, json={"endpoint": "https://hooks.example.com/", "events": ["email.sent"]}
        )
        ids.append(created["id"])
    _, page, _ = await api.json("GET", "/webhooks?limit=2", key)
    assert [w["id"] for w in page["data"]] == ids[:0:-1] and page["has_more"] is True
    _, page, _ = await api.json("GET", f"/webhooks?limit=2&after={ids[1]}", key)
    assert [w["id"] for w in page["data"]] == [ids[0]] and page["has_more"] is False
    code, reply, _ = await api.json("GET", "/webhooks?limit=0", key)
    assert (code, reply["name"]) == (422, "validation_error")
