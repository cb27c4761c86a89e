"""
The operator's audit log: every state-changing operator route writes its entry in the
transaction of its change (no entry, no change), a token cannot take another actor's name, the
log is filtered by actor kind and tenant, and an account's owners have a cap of set-password
links (each one an entry).
"""

from __future__ import annotations

import uuid

import pytest_twisted as pt

from mailsvc.http.access.base import SAFE_METHODS
from mailsvc.http.router import OPERATOR
from tests.helpers.dashboard import PASSWORD, Session, signed_in

#: Makes every write of the audit log fail, in this test's own database.
FAILING_AUDIT = """
CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'the audit log is refusing writes (test)'; END $$;
CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit();
"""


def operator_routes(router) -> set[tuple[str, str]]:
    """(method, path template) of every state-changing operator route."""
    return {(m.method, m.path) for m in router.mounted
            if m.access == OPERATOR and m.path.startswith("/admin/v1") and m.method.encode() not in SAFE_METHODS}


async def audit_entries(api, **query) -> list[dict]:
    args = "&".join(f"{k}={v}" for k, v in {"limit": 100, **query}.items())
    code, body, _ = await api.json("GET", f"/admin/v1/audit?{args}", api.operator_token)
    assert code == 200, body
    return body["data"]


async def throttled(api, destination: str) -> None:
    """A destination the adaptive shaping has throttled, as a worker leaves it."""
    _, listed, _ = await api.json("GET", "/admin/v1/destinations", api.operator_token)
    await api.parts.db.execute(
        "INSERT INTO destination_limits (source, destination, concurrency, rate_per_sec, throttled_at, changed_at)"
        " VALUES (%s, %s, 1, 0.5, 0, 0)", (listed["source"], destination))


class Scenarios:
    """For each operator route: what it takes to call it once successfully, and the call."""

    def __init__(self, api):
        self.api = api

    async def call(self, method: str, path: str, json=None, expect=(200, 201)):
        code, body, _ = await self.api.json(method, path, self.api.operator_token, json=json)
        assert code in expect, (method, path, code, body)
        return body

    async def run(self, method: str, template: str):
        api, call = self.api, self.call
        tenant, _ = await api.tenant(name=f"t-{uuid.uuid4().hex[:8]}")
        email = f"u{uuid.uuid4().hex[:8]}@example.com"
        if (method, template) == ("POST", "/admin/v1/tenants"):
            return await call(method, template, {"name": "Made"})
        if (method, template) == ("PATCH", "/admin/v1/tenants/<tenant_id>"):
            return await call(method, f"/admin/v1/tenants/{tenant['id']}", {"name": "Renamed"})
        if (method, template) == ("PUT", "/admin/v1/destinations/defaults/<pattern>"):
            return await call(method, "/admin/v1/destinations/defaults/example.org",
                              {"concurrency": 3, "rate_per_sec": 2})
        if (method, template) == ("DELETE", "/admin/v1/destinations/defaults/<pattern>"):
            await call("PUT", "/admin/v1/destinations/defaults/gone.example", {"concurrency": 3, "rate_per_sec": 2})
            before = len(await audit_entries(api))
            body = await call(method, "/admin/v1/destinations/defaults/gone.example")
            assert len(await audit_entries(api)) == before + 1
            return body
        if (method, template) == ("DELETE", "/admin/v1/destinations/<destination>"):
            await throttled(api, "mx.throttled.example")
            return await call(method, "/admin/v1/destinations/mx.throttled.example")
        if (method, template) == ("POST", "/admin/v1/operators"):
            return await call(method, template, {"email": email})
        if (method, template) == ("POST", "/admin/v1/operators/password-link"):
            await call("POST", "/admin/v1/operators", {"email": email})
            return await call(method, template, {"email": email})
        if method == "POST" and template.startswith("/admin/v1/queue/"):
            body = {"tenant_id": tenant["id"]}
            if template.endswith("/hold"):
                body["reason"] = "a test"
            return await call(method, template, body)
        if (method, template) == ("POST", "/admin/v1/operator-tokens"):
            return await call(method, template, {"name": f"tok-{uuid.uuid4().hex[:8]}"})
        if (method, template) == ("DELETE", "/admin/v1/operator-tokens/<token_id>"):
            made = await call("POST", "/admin/v1/operator-tokens", {"name": f"tok-{uuid.uuid4().hex[:8]}"})
            return await call(method, f"/admin/v1/operator-tokens/{made['id']}")
        if (method, template) == ("POST", "/admin/v1/tenants/<tenant_id>/users"):
            return await call(method, f"/admin/v1/tenants/{tenant['id']}/users", {"email": email})
        if (method, template) == ("POST", "/admin/v1/users/password-link"):
            await call("POST", f"/admin/v1/tenants/{tenant['id']}/users", {"email": email})
            return await call(method, template, {"email": email})
        if (method, template) == ("POST", "/admin/v1/users/two-factor/reset"):
            await call("POST", f"/admin/v1/tenants/{tenant['id']}/users", {"email": email})
            return await call(method, template, {"email": email})
        if (method, template) == ("POST", "/admin/v1/operators/two-factor/reset"):
            await call("POST", "/admin/v1/operators", {"email": email})
            return await call(method, template, {"email": email})
        raise AssertionError(f"no scenario for {method} {template}: add one (and audit the route)")


@pt.ensureDeferred
async def test_every_state_changing_operator_route_writes_an_audit_entry(api):
    routes = operator_routes(api.parts.router)
    assert len(routes) >= 15 and ("DELETE", "/admin/v1/destinations/<destination>") in routes
    scenarios = Scenarios(api)
    for method, template in sorted(routes):
        before = {e["id"] for e in await audit_entries(api)}
        await scenarios.run(method, template)
        new = [e for e in await audit_entries(api) if e["id"] not in before]
        # The scenario's own call is the newest entry, under the operator token's name.
        assert new and new[0]["actor"] == "operator", (method, template, new)
    actions = {e["action"] for e in await audit_entries(api)}
    assert {"tenant.create", "tenant.update", "destination_default.set", "destination_default.delete",
            "destination.reset", "operator.link", "user.link", "operator_token.create",
            "operator_token.delete", "queue.retry", "queue.hold", "queue.release", "queue.bounce",
            "user.two_factor_reset", "operator.two_factor_reset"} <= actions
    # What a tenant's creation hands out is named: the full-access key.
    (made,) = [e for e in await audit_entries(api) if e["action"] == "tenant.create"
               and e["detail"]["name"] == "Made"]
    assert set(made["detail"]) == {"tenant_id", "name", "plan", "api_key_id"}


@pt.ensureDeferred
async def test_a_change_whose_audit_entry_cannot_be_written_is_rolled_back(api):
    db = api.parts.db
    tenant, _ = await api.tenant(name="Before")
    await api.json("PUT", "/admin/v1/destinations/defaults/kept.example", api.operator_token,
                   json={"concurrency": 3, "rate_per_sec": 2})
    await throttled(api, "mx.kept.example")
    await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                   json={"email": "kept@example.com"})
    await db.execute(FAILING_AUDIT)
    tenants = len(await db.fetchall("SELECT id FROM tenants"))
    calls = [
        ("POST", "/admin/v1/tenants", {"name": "Never"}),
        ("PATCH", f"/admin/v1/tenants/{tenant['id']}", {"name": "Never", "status": "suspended"}),
        ("PUT", "/admin/v1/destinations/defaults/never.example", {"concurrency": 3, "rate_per_sec": 2}),
        ("DELETE", "/admin/v1/destinations/defaults/kept.example", None),
        ("DELETE", "/admin/v1/destinations/mx.kept.example", None),
        ("POST", "/admin/v1/operator-tokens", {"name": "never"}),
        ("POST", "/admin/v1/operators", {"email": "never@example.com"}),
        ("POST", f"/admin/v1/tenants/{tenant['id']}/users", {"email": "never@example.com"}),
        ("POST", "/admin/v1/users/two-factor/reset", {"email": "kept@example.com"}),
    ]
    for method, path, body in calls:
        code, reply, _ = await api.json(method, path, api.operator_token, json=body)
        assert code == 500, (method, path, code, reply)
    assert len(await db.fetchall("SELECT id FROM tenants")) == tenants
    assert (await db.fetchone("SELECT name, status FROM tenants WHERE id = %s", (tenant["id"],))) == {
        "name": "Before", "status": "active"}
    patterns = {r["pattern"] for r in await db.fetchall("SELECT pattern FROM destination_defaults")}
    assert "kept.example" in patterns and "never.example" not in patterns
    assert [r["destination"] for r in await db.fetchall("SELECT destination FROM destination_limits")] == [
        "mx.kept.example"]
    assert await db.fetchall("SELECT id FROM operator_tokens") == []
    assert await db.fetchall("SELECT id FROM operators WHERE email = 'never@example.com'") == []
    assert await db.fetchall("SELECT id FROM users WHERE email = 'never@example.com'") == []


@pt.ensureDeferred
async def test_a_token_cannot_take_the_name_another_kind_of_actor_writes(api):
    for name in ("operator:olga@ops.example", "OPERATOR:olga@ops.example", " operator:x", "user:0190a2b4",
                 "api:key", "system", "System:cron"):
        code, body, _ = await api.json("POST", "/admin/v1/operator-tokens", api.operator_token, json={"name": name})
        assert code == 422, (name, body)
        assert body["error"]["code"] == "validation_error" and body["error"]["field"] == "name", body
        assert body["error"]["message"].startswith("name:"), body
    for name in ("olga", "deploy operator", "ci:nightly", "systemd-timer"):
        code, body, _ = await api.json("POST", "/admin/v1/operator-tokens", api.operator_token, json={"name": name})
        assert code == 201, (name, body)


async def owner_with_users(api, count: int) -> tuple[dict, Session, list[dict]]:
    tenant, _, owner = await signed_in(api, email=f"owner-{uuid.uuid4().hex[:6]}@example.com")
    users = []
    for n in range(count):
        code, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                       json={"email": f"m{n}-{uuid.uuid4().hex[:6]}@example.com", "role": "member"})
        assert code == 201, user
        users.append(user)
    return tenant, owner, users


@pt.ensureDeferred
async def test_an_owner_gets_five_links_an_hour_for_a_user_and_twenty_for_the_account(api):
    tenant, owner, users = await owner_with_users(api, 5)
    for _ in range(5):
        code, body, _ = await owner.json("POST", f"/dashboard/users/{users[0]['id']}/password-link")
        assert code == 200, body
    code, body, response = await owner.json("POST", f"/dashboard/users/{users[0]['id']}/password-link")
    assert code == 429 and body["name"] == "rate_limit_exceeded", body
    wait = int(response.headers.getRawHeaders("retry-after")[0])
    assert 0 < wait <= 720 and f"try again in {wait} seconds" in body["message"], body
    # Another user of the account still gets one; the refused link was not audited.
    code, body, _ = await owner.json("POST", f"/dashboard/users/{users[1]['id']}/password-link")
    assert code == 200, body
    links = [e for e in await audit_entries(api, tenant_id=tenant["id"], actor_kind="user")]
    assert len(links) == 6 and {e["action"] for e in links} == {"user.link"}
    # The account's cap: 20 in all (the 6 above, and invitations count too).
    for user in users[1:4]:
        for _ in range(4 if user is users[1] else 5):
            code, body, _ = await owner.json("POST", f"/dashboard/users/{user['id']}/password-link")
            assert code == 200, body
    code, body, _ = await owner.json("POST", f"/dashboard/users/{users[4]['id']}/password-link")
    assert code == 429 and "for the account" in body["message"], body
    code, body, _ = await owner.json("POST", "/dashboard/users", json={"email": "late@example.com"})
    assert code == 429, body
    # ... and the refused invitation made no user.
    assert await api.parts.db.fetchall("SELECT id FROM users WHERE email = 'late@example.com'") == []
    # Another account's owner is not held back.
    _, other, others = await owner_with_users(api, 1)
    code, body, _ = await other.json("POST", f"/dashboard/users/{others[0]['id']}/password-link")
    assert code == 200, body


@pt.ensureDeferred
async def test_the_audit_log_is_filtered_by_actor_kind_and_tenant(api):
    acme, _, owner = await signed_in(api, email="owner@acme.example", name="Acme")
    other, _ = await api.tenant(name="Other")
    await api.json("PATCH", f"/admin/v1/tenants/{other['id']}", api.operator_token, json={"daily_quota": 9})
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "mia@acme.example"})
    assert code == 201
    await api.json("POST", "/admin/v1/queue/hold", api.operator_token,
                   json={"tenant_id": acme["id"], "reason": "a look"})
    # A console operator's entry.
    code, made, _ = await api.json("POST", "/admin/v1/operators", api.operator_token, json={"email": "o@ops.example"})
    code, body, response = await api.json("POST", "/console/auth/password",
                                          json={"token": made["set_password_url"].rsplit("/", 1)[1],
                                                "password": PASSWORD})
    assert code == 200, body
    console_cookie = response.headers.getRawHeaders("set-cookie")[0].split(";")[0]
    code, _, _ = await api.json("PATCH", f"/console/admin/v1/tenants/{acme['id']}", json={"daily_quota": 7},
                                headers={"Cookie": console_cookie, "X-CSRF-Token": body["csrf_token"]})
    assert code == 200

    users = await audit_entries(api, actor_kind="user")
    assert [(e["actor"], e["action"]) for e in users] == [(f"user:{owner.user['id']}", "user.link")]
    operators = await audit_entries(api, actor_kind="operator")
    assert [(e["actor"], e["action"]) for e in operators] == [("operator:o@ops.example", "tenant.update")]
    tokens = await audit_entries(api, actor_kind="token")
    assert tokens and {e["actor"] for e in tokens} == {"operator"}
    # About Acme: its creation, its first user's link, the member's link, the hold, the console's change.
    about_acme = await audit_entries(api, tenant_id=acme["id"])
    assert [e["action"] for e in reversed(about_acme)] == [
        "tenant.create", "tenant.update", "user.link", "user.link", "queue.hold", "tenant.update"], about_acme
    assert all(acme["id"] in (e["detail"].get("tenant_id"), (e["filter"] or {}).get("tenant_id"))
               for e in about_acme)
    both = await audit_entries(api, tenant_id=acme["id"], actor_kind="user")
    assert [e["detail"]["email"] for e in both] == ["mia@acme.example"]
    assert await audit_entries(api, tenant_id=other["id"], actor_kind="operator") == []
    for query, field in (("actor_kind=robot", "actor_kind"), ("tenant_id=acme", "tenant_id")):
        code, body, _ = await api.json("GET", f"/admin/v1/audit?{query}", api.operator_token)
        assert code == 422 and body["error"]["field"] == field, body

