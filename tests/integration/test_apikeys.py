"""API keys through the official Python SDK, plain HTTP and the native surface."""

import secrets

import pytest
import pytest_twisted as pt
import resend
import resend.exceptions
from twisted.internet import reactor, task

from mailsvc import compose
from mailsvc.app.apikeys import KeyRing
from mailsvc.domain.apikeys import API, NewKey
from tests.conftest import Api
from tests.helpers.sdk import call
from tests.helpers.tenants import accounts_for


@pt.ensureDeferred
async def test_create_list_rename_delete_with_the_sdk(api):
    _, key = await api.tenant()
    created = await call(api, key, resend.ApiKeys.create, {"name": "Production"})
    assert created["token"].startswith("re_")
    assert created["object"] == "api_key"

    listed = await call(api, key, resend.ApiKeys.list)
    names = {item["name"]: item for item in listed["data"]}
    assert set(names) == {"Production", "Default"}
    assert set(names["Production"]) == {"id", "name", "created_at", "last_used_at"}
    assert names["Production"]["last_used_at"] is None

    renamed = await call(api, key, resend.ApiKeys.update, {"id": created["id"], "name": "Prod"})
    assert renamed["id"] == created["id"] and renamed["object"] == "api_key"
    listed = await call(api, key, resend.ApiKeys.list)
    assert {item["name"] for item in listed["data"]} == {"Prod", "Default"}

    # The new key works, then stops working once deleted.
    assert (await call(api, created["token"], resend.ApiKeys.list))["data"]
    removed = await call(api, key, resend.ApiKeys.remove, created["id"])
    assert removed["deleted"] is True and removed["id"] == created["id"]
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, created["token"], resend.ApiKeys.list)
    assert e.value.code == 403 and e.value.error_type == "invalid_api_key"


@pt.ensureDeferred
async def test_last_used_at_is_reported_without_a_write_per_request(api):
    _, key = await api.tenant()
    _, listed, _ = await api.json("GET", "/api-keys", key)
    assert listed["data"][0]["last_used_at"] is not None
    rows = await api.parts.db.fetchall("SELECT last_used_at FROM api_keys")
    assert rows[0]["last_used_at"] is None  # gathered in memory until the flush
    await api.parts.keyring.flush_last_used()
    rows = await api.parts.db.fetchall("SELECT last_used_at FROM api_keys")
    assert rows[0]["last_used_at"] is not None


@pt.ensureDeferred
async def test_authentication_errors(api):
    _, key = await api.tenant()
    code, body, _ = await api.json("GET", "/api-keys")
    assert (code, body["name"]) == (401, "missing_api_key")
    code, body, _ = await api.json("GET", "/api-keys", headers={"Authorization": f"Basic {key}"})
    assert (code, body["name"]) == (401, "missing_api_key")
    code, body, _ = await api.json("GET", "/api-keys", headers={"Authorization": f"bearer {key}"})
    assert (code, body["name"]) == (401, "missing_api_key")
    code, body, _ = await api.json("GET", "/api-keys", key[:-1] + ("A" if key[-1] != "A" else "B"))
    assert (code, body["name"]) == (403, "invalid_api_key")
    code, body, _ = await api.json("GET", "/api-keys", "re_nothing")
    assert (code, body["name"]) == (403, "invalid_api_key")
    with pytest.raises(resend.exceptions.InvalidApiKeyError):
        await call(api, "re_AAAAAAAA_wrong", resend.ApiKeys.list)


@pt.ensureDeferred
async def test_sending_access_key_is_restricted(api):
    _, key = await api.tenant()
    _, created, _ = await api.json(
        "POST", "/api-keys", key, json={"name": "sender", "permission": "sending_access"}
    )
    code, body, _ = await api.json("GET", "/api-keys", created["token"])
    assert (code, body["name"]) == (401, "restricted_api_key")
    code, body, _ = await api.json("POST", "/api-keys", created["token"], json={"name": "x"})
    assert (code, body["name"]) == (401, "restricted_api_key")


@pt.ensureDeferred
async def test_create_validation(api):
    _, key = await api.tenant()
    for body, field in [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 51}, "name"),
        ({"name": 5}, "name"),
        ({"name": "ok", "permission": "admin"}, "permission"),
        ({"name": "ok", "domain_id": "nope"}, "domain_id"),
    ]:
        code, reply, _ = await api.json("POST", "/api-keys", key, json=body)
        assert code == 422, body
        assert reply["name"] == "validation_error"
        assert reply["message"].startswith(field), reply
    code, reply, _ = await api.json("POST", "/api-keys", key, json={"name": "x" * 50})
    assert code == 200
    code, reply, _ = await api.json(
        "POST", "/api-keys", key,
        json={"name": "d", "permission": "sending_access",
              "domain_id": "0190a2b4-0000-7000-8000-000000000000"},
    )
    assert (code, reply["name"], reply["message"]) == (404, "not_found", "Domain not found")


@pt.ensureDeferred
async def test_domain_restricted_key_is_sending_access(api):
    tenant, key = await api.tenant()
    domain_id = "0190a2b4-0000-7000-8000-00000000d001"
    await api.parts.db.execute(
        "INSERT INTO domains (id, tenant_id, name, status, created_at)"
        " VALUES (%s, %s, 'example.com', 'verified', now())",
        (domain_id, tenant["id"]),
    )
    code, created, _ = await api.json("POST", "/api-keys", key, json={"name": "d", "domain_id": domain_id})
    assert code == 200
    _, native, _ = await api.json("GET", "/v1/api-keys", key)
    row = next(k for k in native["data"] if k["id"] == created["id"])
    assert row["permission"] == "sending_access" and row["domain_id"] == domain_id
    code, body, _ = await api.json("GET", "/api-keys", created["token"])
    assert (code, body["name"]) == (401, "restricted_api_key")


@pt.ensureDeferred
async def test_unknown_or_malformed_ids_are_404(api):
    _, key = await api.tenant()
    for path in ("/api-keys/not-a-uuid", "/api-keys/0190a2b4-0000-7000-8000-000000000000"):
        code, body, _ = await api.json("DELETE", path, key)
        assert (code, body["name"], body["message"]) == (404, "not_found", "API key not found")
        code, body, _ = await api.json("PATCH", path, key, json={"name": "x"})
        assert (code, body["name"]) == (404, "not_found")


@pt.ensureDeferred
async def test_tenant_isolation(api):
    _, key_a = await api.tenant(name="A")
    _, key_b = await api.tenant(name="B")
    _, b_listed, _ = await api.json("GET", "/api-keys", key_b)
    b_key_id = b_listed["data"][0]["id"]
    code, body, _ = await api.json("PATCH", f"/api-keys/{b_key_id}", key_a, json={"name": "mine"})
    assert (code, body["name"]) == (404, "not_found")
    code, body, _ = await api.json("DELETE", f"/api-keys/{b_key_id}", key_a)
    assert (code, body["name"]) == (404, "not_found")
    code, _, _ = await api.json("DELETE", f"/v1/api-keys/{b_key_id}", key_a)
    assert code == 404
    _, a_listed, _ = await api.json("GET", "/api-keys", key_a)
    assert b_key_id not in {k["id"] for k in a_listed["data"]}
    # B's key still works.
    code, _, _ = await api.json("GET", "/api-keys", key_b)
    assert code == 200


@pt.ensureDeferred
async def test_native_surface(api):
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/v1/api-keys", key, json={"name": "native"})
    assert code == 201
    assert created["token"].startswith("re_") and created["permission"] == "full_access"
    code, listed, _ = await api.json("GET", "/v1/api-keys", key)
    assert code == 200 and "token" not in listed["data"][0]
    response, body = await api.request("DELETE", f"/v1/api-keys/{created['id']}", key)
    assert response.code == 204 and body == b""
    code, error, _ = await api.json("POST", "/v1/api-keys", key, json={"name": ""})
    assert code == 422
    assert error["error"]["code"] == "validation_error" and error["error"]["field"] == "name"


@pt.ensureDeferred
async def test_revocation_reaches_another_node_within_the_cache_time(db):
    """Two key rings on one database stand for two nodes; time is a Clock."""
    clock = task.Clock()
    clock.advance(1_800_000_000)
    secret = b"k" * 32
    node_a = KeyRing(clock, db, secret, "re", cache_seconds=10)
    node_b = KeyRing(clock, db, secret, "re", cache_seconds=10)
    tenant, row, token = await accounts_for(clock, db, node_a).create_tenant({"name": "t"})
    assert await node_b.authenticate(str(token)) is not None
    await node_a.revoke(tenant.id, row["id"])
    assert await node_a.authenticate(str(token)) is None
    clock.advance(9)
    assert await node_b.authenticate(str(token)) is not None  # still cached on node B
    clock.advance(1)
    assert await node_b.authenticate(str(token)) is None


@pt.ensureDeferred
async def test_only_an_hmac_of_the_secret_is_stored(db):
    clock = task.Clock()
    ring = KeyRing(clock, db, b"s" * 32, "re", cache_seconds=10)
    tenant, _, token = await accounts_for(clock, db, ring).create_tenant({"name": "t"})
    _, second = await ring.create(tenant.id, NewKey("n", "full_access", None), API)
    rows = await db.fetchall("SELECT * FROM api_keys")
    dump = repr(rows)
    for t in (token, second):
        assert t.secret not in dump
    other_server = KeyRing(clock, db, b"z" * 32, "re", cache_seconds=10)
    assert await other_server.authenticate(str(second)) is None
    assert await ring.authenticate(str(second)) is not None


@pt.async_yield_fixture
async def two_apps(db, config):
    """Two applications assembled as two processes are (two key caches, one database), each
    following the key changes as a started process does."""
    master, operator_token = secrets.token_bytes(32), "op_" + secrets.token_urlsafe(16)
    apps = []
    for _ in range(2):
        parts = compose.assemble(reactor, config, db, master, operator_token)
        await parts.keyring.follow(parts.notifications)  # as the tree starts it
        apps.append(Api(parts, reactor.listenTCP(0, parts.site, interface="127.0.0.1"), operator_token))
    yield apps
    for app in apps:
        app.parts.notifications.stop()
        await app.pool.closeCachedConnections()
        await app.port.stopListening()


async def refused_within(app, token: str, seconds: float, code: int) -> float:
    """Polls ``GET /api-keys`` with ``token`` until it answers ``code``; the seconds it took."""
    started = reactor.seconds()
    while True:
        answered, _, _ = await app.json("GET", "/api-keys", token)
        waited = reactor.seconds() - started
        if answered == code:
            return waited
        assert waited < seconds, f"still {answered} after {waited:.2f} s"
        await task.deferLater(reactor, 0.05, lambda: None)


@pt.ensureDeferred
async def test_a_revoked_key_is_refused_by_every_process_within_a_second(two_apps):
    first, second = two_apps
    _, token = await first.tenant()
    _, other = await first.tenant(name="Other")
    _, listed, _ = await first.json("GET", "/api-keys", token)
    (key,) = listed["data"]
    for app in two_apps:  # both caches hold the key now (for 30 s)
        assert (await app.json("GET", "/api-keys", token))[0] == 200
        assert (await app.json("GET", "/api-keys", other))[0] == 200
    code, _, _ = await first.json("DELETE", f"/api-keys/{key['id']}", token)
    assert code == 200
    assert await refused_within(second, token, 1.0, 403) < 1.0  # as an unknown key: invalid_api_key
    assert (await second.json("GET", "/api-keys", other))[0] == 200  # another account's key is untouched


@pt.ensureDeferred
async def test_a_suspended_account_is_seen_by_every_process_within_a_second(two_apps):
    first, second = two_apps
    tenant, token = await first.tenant()
    assert (await second.parts.keyring.authenticate(token)).tenant.status == "active"  # cached there
    code, _, _ = await first.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", first.operator_token,
                                  json={"status": "suspended"})
    assert code == 200
    started = reactor.seconds()
    while (await second.parts.keyring.authenticate(token)).tenant.status != "suspended":
        assert reactor.seconds() - started < 1.0, "the other process still sees the account active"
        await task.deferLater(reactor, 0.05, lambda: None)
