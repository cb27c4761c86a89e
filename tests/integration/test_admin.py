"""The operator API, the public waitlist, health and metrics."""

import pytest
import pytest_twisted as pt
from twisted.internet import task

from mailsvc.app.accounts import WAITLIST
from mailsvc.domain.clients import network_of
from mailsvc.domain.errors import RateLimited
from mailsvc.domain.tenant import PLANS
from mailsvc.http.waitlist import spreadsheet_text
from tests.helpers.tenants import accounts_for


@pt.ensureDeferred
async def test_operator_token_is_required(api):
    code, body, _ = await api.json("POST", "/admin/v1/tenants", json={"name": "x"})
    assert code == 401 and set(body) == {"error"}
    code, body, _ = await api.json("POST", "/admin/v1/tenants", "op_wrong", json={"name": "x"})
    assert code == 403 and body["error"]["code"] == "forbidden"
    # An API key is not an operator credential.
    _, key = await api.tenant()
    code, _, _ = await api.json("GET", "/admin/v1/waitlist", key)
    assert code == 403


@pt.ensureDeferred
async def test_create_tenant_starts_in_the_sandbox_on_free(api):
    code, created, _ = await api.json("POST", "/admin/v1/tenants", api.operator_token, json={"name": "Acme"})
    assert code == 201
    assert created["plan"] == "free" and created["sandbox"] is True and created["status"] == "active"
    assert (created["monthly_quota"], created["daily_quota"], created["max_domains"]) == (10_000, 500, 1)
    assert created["api_key"]["token"].startswith("re_")
    assert created["api_key"]["permission"] == "full_access"

    code, fetched, _ = await api.json("GET", f"/admin/v1/tenants/{created['id']}", api.operator_token)
    assert code == 200
    assert "api_key" not in fetched and "token" not in str(fetched)
    assert fetched["id"] == created["id"]


@pt.ensureDeferred
async def test_create_with_id_and_plan(api):
    tenant_id = "0190a2b4-1111-7000-8000-000000000001"
    code, created, _ = await api.json(
        "POST", "/admin/v1/tenants", api.operator_token,
        json={"name": "Big", "id": tenant_id, "plan": "scale"},
    )
    assert code == 201
    assert created["id"] == tenant_id and created["plan"] == "scale" and created["sandbox"] is False
    assert created["max_domains"] is None and created["monthly_quota"] == 1_000_000
    code, body, _ = await api.json(
        "POST", "/admin/v1/tenants", api.operator_token, json={"name": "Again", "id": tenant_id}
    )
    assert code == 409 and body["error"]["code"] == "conflict"


@pt.ensureDeferred
async def test_create_validation(api):
    for body, field in [({}, "name"), ({"name": " "}, "name"), ({"name": "x", "plan": "gold"}, "plan"),
                        ({"name": "x", "id": "123"}, "id")]:
        code, reply, _ = await api.json("POST", "/admin/v1/tenants", api.operator_token, json=body)
        assert code == 422, body
        assert reply["error"]["code"] == "validation_error"
        assert reply["error"]["field"] == field
        assert reply["error"]["message"].startswith(field)


@pt.ensureDeferred
async def test_patch_every_updatable_field(api):
    _, created, _ = await api.json("POST", "/admin/v1/tenants", api.operator_token, json={"name": "A"})
    path = f"/admin/v1/tenants/{created['id']}"
    change = {
        "name": "Renamed", "status": "paused", "status_reason": "bounce rate 6%",
        "daily_quota": 123, "send_rate_per_sec": 7, "api_rate_per_sec": 30,
        "delivery_mode": "capture", "monthly_quota": 4567, "max_domains": 2,
    }
    code, patched, _ = await api.json("PATCH", path, api.operator_token, json=change)
    assert code == 200
    for field, value in change.items():
        assert patched[field] == value, field
    _, fetched, _ = await api.json("GET", path, api.operator_token)
    assert {k: fetched[k] for k in change} == change

    # A plan brings its defaults, unless the same request sets them.
    code, patched, _ = await api.json("PATCH", path, api.operator_token, json={"plan": "growth"})
    growth = PLANS["growth"]
    assert (patched["daily_quota"], patched["monthly_quota"], patched["max_domains"]) == (
        growth.daily_quota, growth.monthly_quota, growth.max_domains)
    assert patched["sandbox"] is False
    code, patched, _ = await api.json(
        "PATCH", path, api.operator_token, json={"plan": "starter", "daily_quota": 99}
    )
    assert patched["daily_quota"] == 99 and patched["monthly_quota"] == PLANS["starter"].monthly_quota

    # Resuming clears the reason unless one is given.
    _, patched, _ = await api.json("PATCH", path, api.operator_token, json={"status": "active"})
    assert patched["status"] == "active" and patched["status_reason"] is None


@pt.ensureDeferred
async def test_patch_validation(api):
    _, created, _ = await api.json("POST", "/admin/v1/tenants", api.operator_token, json={"name": "A"})
    path = f"/admin/v1/tenants/{created['id']}"
    for body, field in [
        ({"status": "frozen"}, "status"), ({"plan": "x"}, "plan"), ({"daily_quota": -1}, "daily_quota"),
        ({"daily_quota": "5"}, "daily_quota"), ({"send_rate_per_sec": 0}, "send_rate_per_sec"),
        ({"api_rate_per_sec": True}, "api_rate_per_sec"), ({"delivery_mode": "smoke"}, "delivery_mode"),
        ({"max_domains": 1.5}, "max_domains"), ({"name": ""}, "name"), ({"status_reason": 5}, "status_reason"),
    ]:
        code, reply, _ = await api.json("PATCH", path, api.operator_token, json=body)
        assert code == 422, body
        assert reply["error"]["field"] == field
    for missing in ("/admin/v1/tenants/0190a2b4-1111-7000-8000-00000000ffff", "/admin/v1/tenants/zzz"):
        code, reply, _ = await api.json("PATCH", missing, api.operator_token, json={"name": "x"})
        assert code == 404 and reply["error"]["code"] == "not_found"
        code, reply, _ = await api.json("GET", missing, api.operator_token)
        assert code == 404


@pt.ensureDeferred
async def test_operator_changes_apply_to_the_tenants_keys_on_this_node(api):
    created, key = await api.tenant(api_rate_per_sec=1000)
    await api.json("GET", "/api-keys", key)  # cached
    await api.json("PATCH", f"/admin/v1/tenants/{created['id']}", api.operator_token,
                   json={"status": "suspended"})
    caller = await api.parts.keyring.authenticate(key)
    assert caller.tenant.status == "suspended"


@pt.ensureDeferred
async def test_waitlist(api):
    answers = []
    for address in ("Ann@Example.COM", "ann@example.com", "bob@xn--bcher-kva.example", "carl@bücher.example"):
        code, entry, _ = await api.json("POST", "/public/waitlist", json={"email": address})
        answers.append((code, entry))
    # Joining again looks exactly like joining first: nobody learns who is on the list.
    assert answers[0] == answers[1] == (200, {"object": "waitlist_entry", "email": "ann@example.com"})
    assert answers[3] == (200, {"object": "waitlist_entry", "email": "carl@xn--bcher-kva.example"})
    code, entry, _ = await api.json("POST", "/public/waitlist", json={"email": "not an address"})
    assert code == 422 and entry["name"] == "validation_error" and entry["message"].startswith("email")
    code, entry, _ = await api.json("POST", "/public/waitlist", json={})
    assert code == 422

    code, listed, _ = await api.json("GET", "/admin/v1/waitlist", api.operator_token)
    assert code == 200
    assert [e["email"] for e in listed["data"]] == [
        "carl@xn--bcher-kva.example", "bob@xn--bcher-kva.example", "ann@example.com"]
    _, first, _ = await api.json("GET", "/admin/v1/waitlist?limit=1", api.operator_token)
    assert first["has_more"] is True and len(first["data"]) == 1
    _, rest, _ = await api.json(
        "GET", f"/admin/v1/waitlist?limit=1&after={first['data'][0]['id']}", api.operator_token
    )
    assert rest["data"][0]["email"] == "bob@xn--bcher-kva.example" and rest["has_more"] is True

    response, body = await api.request("GET", "/admin/v1/waitlist?format=csv", api.operator_token)
    assert response.code == 200
    assert response.headers.getRawHeaders("content-type")[0].startswith("text/csv")
    lines = body.decode().splitlines()
    assert lines[0] == "id,email,created_at" and len(lines) == 4
    code, _, _ = await api.json("GET", "/admin/v1/waitlist?format=xml", api.operator_token)
    assert code == 422


@pt.ensureDeferred
async def test_the_waitlist_csv_shows_formula_like_cells_as_text(api):
    # Valid addresses a spreadsheet would run as formulas (OWASP CSV injection).
    for address in ("=1+2@example.com", "+1-2@example.com", "-2+3@example.com", "ann@example.com"):
        assert (await api.json("POST", "/public/waitlist", json={"email": address}))[0] == 200
    response, body = await api.request("GET", "/admin/v1/waitlist?format=csv", api.operator_token)
    emails = [line.split(",")[1] for line in body.decode().splitlines()[1:]]
    assert emails == ["ann@example.com", "'-2+3@example.com", "'+1-2@example.com", "'=1+2@example.com"]


@pytest.mark.parametrize(
    ("cell", "written"),
    [("=SUM(A1)", "'=SUM(A1)"), ("+1", "'+1"), ("-1", "'-1"), ("@cmd", "'@cmd"), ("\tx", "'\tx"),
     ("\rx", "'\rx"), ("a=b", "a=b"), ("'quoted", "'quoted"), ("", "")],
)
def test_spreadsheet_text(cell, written):
    assert spreadsheet_text(cell) == written


@pytest.mark.parametrize(("host", "network"), [
    ("192.0.2.7", "192.0.2.7"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    (None, "local"),
])
def test_clients_count_by_network(host, network):
    assert network_of(host) == network


@pt.ensureDeferred
async def test_waitlist_is_rate_limited_per_client_on_every_node(db, api):
    accounts = accounts_for(task.Clock(), db, api.parts.keyring)
    for i in range(WAITLIST.burst):
        assert await accounts.join_waitlist(f"u{i}@example.com", "192.0.2.1") == f"u{i}@example.com"
    with pytest.raises(RateLimited):
        await accounts.join_waitlist("late@example.com", "192.0.2.1")
    with pytest.raises(RateLimited):  # invalid addresses count too
        await accounts.join_waitlist("not an address", "192.0.2.1")
    another_node = accounts_for(task.Clock(), db, api.parts.keyring)
    with pytest.raises(RateLimited) as refused:  # every node counts on the one database
        await another_node.join_waitlist("late@example.com", "192.0.2.1")
    assert refused.value.retry_after == 6
    assert await accounts.join_waitlist("late@example.com", "192.0.2.2") == "late@example.com"

    # Over HTTP: 429 rate_limit_exceeded with Retry-After (the burst is spent at once).
    responses = [await api.json("POST", "/public/waitlist", json={"email": f"h{i}@example.com"})
                 for i in range(WAITLIST.burst + 2)]
    code, body, response = responses[-1]
    assert (code, body["name"]) == (429, "rate_limit_exceeded")
    assert int(response.headers.getRawHeaders("retry-after")[0]) >= 1


@pt.ensureDeferred
async def test_health_and_metrics(api):
    code, body, _ = await api.json("GET", "/healthz")
    assert (code, body) == (200, {"status": "ok"})
    await api.json("GET", "/nowhere")
    response, _ = await api.request("GET", "/metrics")
    assert response.code == 401
    response, text = await api.request("GET", "/metrics", api.operator_token)
    assert response.code == 200
    text = text.decode()
    assert 'mailsvc_http_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert 'route="unmatched",status="404"' in text
    assert "mailsvc_http_request_duration_seconds_bucket" in text


@pt.ensureDeferred
async def test_each_audience_reaches_its_own_routes(api):
    """The operator API, a tenant's usage, the waitlist form and /healthz: one module each, each
    route with the credential of its audience only."""
    tenant, key = await api.tenant()
    code, own, _ = await api.json("GET", "/v1/usage", key)
    assert code == 200
    code, seen, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}/usage", api.operator_token)
    assert (code, seen) == (200, own)
    code, _, _ = await api.json("GET", "/v1/usage", api.operator_token)
    assert code == 403
    code, _, _ = await api.json("GET", "/admin/v1/destinations", key)
    assert code == 403
    code, body, _ = await api.json("POST", "/public/waitlist", json={"email": "audience@example.com"})
    assert (code, body) == (200, {"object": "waitlist_entry", "email": "audience@example.com"})
    code, body, _ = await api.json("GET", "/healthz")
    assert (code, body) == (200, {"status": "ok"})
