"""
The operator console's HTTP side: operators' accounts, their sign-in, the
console's own cookie and CSRF token, the operator API served to a console session at
``/console/admin/v1``, audited as ``operator:<email>``; never a tenant's session, and never
the other way round. The browser test is in test_console_browser.py.
"""

from __future__ import annotations

import re
import uuid

import argon2
import pytest
import pytest_twisted as pt
from twisted.internet import defer
from twisted.internet.task import Clock

from mailsvc.app.console import Console, ConsoleSettings
from mailsvc.app.throttle import Throttle
from mailsvc.domain.errors import SignInRefused
from mailsvc.http.access.base import SAFE_METHODS
from mailsvc.http.router import OPERATOR_SESSION
from tests.helpers.console import (
    PASSWORD,
    ConsoleSession,
    console_cookie,
    console_login,
    console_signed_in,
    error_code,
    new_operator,
)
from tests.helpers.dashboard import signed_in


@pt.ensureDeferred
async def test_an_operator_account_is_made_by_the_operator_api_with_an_audited_link_that_works_once(api):
    created = await new_operator(api, "Ops@Example.COM", "Olga")
    assert created["email"] == "ops@example.com" and created["name"] == "Olga" and created["status"] == "invited"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/console/#/set-password/[\w-]+", created["set_password_url"])
    code, body, _ = await api.json("POST", "/admin/v1/operators", api.operator_token, json={"email": "ops@example.com"})
    assert code == 409, body
    token = created["set_password_url"].rsplit("/", 1)[1]
    # A console link is not a dashboard link, nor the other way round (keys of their own).
    assert (await api.json("POST", "/auth/password", json={"token": token, "password": PASSWORD}))[0] == 401
    code, body, _ = await api.json("POST", "/console/auth/password", json={"token": token, "password": PASSWORD})
    assert code == 200 and body["status"] == "active" and body["csrf_token"]
    code, body, _ = await api.json("POST", "/console/auth/password", json={"token": token, "password": PASSWORD})
    assert code == 401, body
    # A forgotten password: a new link, audited too.
    code, relinked, _ = await api.json("POST", "/admin/v1/operators/password-link", api.operator_token,
                                       json={"email": "ops@example.com"})
    assert code == 200 and "/console/#/set-password/" in relinked["set_password_url"]
    code, body, _ = await api.json("POST", "/admin/v1/operators/password-link", api.operator_token,
                                   json={"email": "nobody@example.com"})
    assert code == 404, body
    code, audit, _ = await api.json("GET", "/admin/v1/audit", api.operator_token)
    links = [e for e in audit["data"] if e["action"] == "operator.link"]
    assert [(e["actor"], e["detail"]["email"]) for e in links] == [("operator", "ops@example.com")] * 2
    row = await api.parts.db.fetchone("SELECT password_hash FROM operators")
    assert row["password_hash"].startswith("$argon2id$")


@pt.ensureDeferred
async def test_sign_in_sets_a_strict_cookie_of_its_own_and_sign_out_ends_it(api):
    await console_signed_in(api)
    code, body, response = await console_login(api, "OPS@example.com", PASSWORD)
    assert code == 200 and body["email"] == "ops@example.com"
    header, token = console_cookie(response)
    attributes = [a.strip() for a in header.split(";")]
    assert attributes[0] == f"mailsvc_operator={token}" and len(token) >= 40
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes) and "Secure" not in attributes
    code, _, response = await console_login(api, "ops@example.com", PASSWORD, headers={"Host": "mail.example.com"})
    assert code == 200 and "Secure" in {a.strip() for a in console_cookie(response)[0].split(";")}
    session = ConsoleSession(api, token, body["csrf_token"])
    code, me, _ = await session.json("GET", "/console/me")
    assert code == 200 and me["email"] == "ops@example.com" and me["csrf_token"] == body["csrf_token"]
    code, _, response = await session.json("POST", "/console/auth/logout")
    assert code == 200 and "Max-Age=0" in console_cookie(response)[0]
    assert (await session.json("GET", "/console/me"))[0] == 401
    # Wrong passwords are throttled as the dashboard's are.
    codes = [(await console_login(api, "ops@example.com", "wrong password"))[0] for _ in range(7)]
    assert codes == [401] * 5 + [429] * 2, codes


@pt.ensureDeferred
async def test_a_session_ends_after_an_hour_idle(api):
    session = await console_signed_in(api)
    assert (await session.json("GET", "/console/admin/v1/queue"))[0] == 200
    await api.parts.db.execute("UPDATE operator_sessions SET last_seen_at = now() - interval '61 minutes'")
    code, body, _ = await session.json("GET", "/console/admin/v1/queue")
    assert code == 401 and error_code(body) == "session_required", body
    session = ConsoleSession(api, console_cookie((await console_login(api, "ops@example.com", PASSWORD))[2])[1], "")
    await api.parts.db.execute("UPDATE operator_sessions SET last_seen_at = now() - interval '59 minutes'")
    assert (await session.json("GET", "/console/me"))[0] == 200


@pt.ensureDeferred
async def test_idle_for_an_hour_ends_a_session_however_young(db):
    clock = Clock()
    clock.advance(1_800_000_000)
    console = Console(clock, db, b"l" * 32, b"c" * 32, Throttle(clock, db), lambda work: defer.succeed(work()),
                      ConsoleSettings(), argon2.PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))
    row, token = await console.create({"email": "ops@example.com"})
    signed = await console.set_password({"token": token, "password": PASSWORD})
    # Used every 59 minutes, it lives on; a request is a use.
    for _ in range(3):
        clock.advance(59 * 60)
        assert await console.authenticate(signed.token) == "ops@example.com"
    clock.advance(60 * 60 + 1)
    assert await console.authenticate(signed.token) is None
    # A link works a day.
    _, token = await console.link({"email": "ops@example.com"})
    clock.advance(86400 + 1)
    with pytest.raises(SignInRefused, match="expired"):
        await console.set_password({"token": token, "password": PASSWORD})


@pt.ensureDeferred
async def test_every_state_changing_console_route_refuses_a_missing_or_wrong_csrf_token(api):
    session = await console_signed_in(api)
    routes = []
    for mounted in api.parts.router.mounted:
        if mounted.access == OPERATOR_SESSION and mounted.method.encode() not in SAFE_METHODS:
            routes.append((mounted.method, re.sub(r"<(?:path:)?\w+>", str(uuid.uuid4()), mounted.path)))
    assert ("POST", "/console/admin/v1/queue/hold") in routes and ("POST", "/console/auth/logout") in routes
    for method, path in sorted(routes):
        for headers in ({}, {"X-CSRF-Token": "wrong"}):
            code, body, _ = await session.json(method, path, csrf=False, headers=headers, json={})
            assert code == 403 and error_code(body) == "invalid_csrf_token", (method, path, body)
    # The right token, from another site: refused all the same (no origin is listed for the console).
    code, body, _ = await session.json("POST", "/console/admin/v1/queue/retry", headers={"Origin": "https://evil.example"},
                                       json={"state": "deferred"})
    assert code == 403, body
    code, body, _ = await console_login(api, "ops@example.com", PASSWORD, headers={"Origin": "https://evil.example"})
    assert code == 403, body
    assert (await session.json("GET", "/console/me"))[0] == 200


@pt.ensureDeferred
async def test_a_tenant_session_never_reaches_the_console_nor_an_operator_session_the_dashboard(api):
    _, _, tenant_session = await signed_in(api)
    operator = await console_signed_in(api)
    # The tenant's cookie on console routes, alone or under the console cookie's name.
    for cookie in (f"mailsvc_session={tenant_session.token}", f"mailsvc_operator={tenant_session.token}"):
        headers = {"Cookie": cookie, "X-CSRF-Token": tenant_session.csrf}
        for method, path in (("GET", "/console/me"), ("GET", "/console/admin/v1/tenants"),
                             ("POST", "/console/admin/v1/queue/retry")):
            code, body, _ = await api.json(method, path, headers=headers, json={} if method == "POST" else None)
            assert code == 401, (cookie, path, body)
    # The operator's cookie on the dashboard's routes, alone or under the dashboard cookie's name.
    for cookie in (f"mailsvc_operator={operator.token}", f"mailsvc_session={operator.token}"):
        headers = {"Cookie": cookie, "X-CSRF-Token": operator.csrf}
        for method, path in (("GET", "/me"), ("GET", "/dashboard/api-keys"), ("POST", "/dashboard/api-keys")):
            code, body, _ = await api.json(method, path, headers=headers, json={} if method == "POST" else None)
            assert code == 401, (cookie, path, body)
    # Nor does the operator token sign in a browser.
    assert (await api.json("GET", "/console/me", api.operator_token))[0] == 401
    assert (await api.json("GET", "/console/admin/v1/tenants", api.operator_token))[0] == 401


@pt.ensureDeferred
async def test_the_console_reaches_the_operator_api_and_its_actions_are_audited_under_the_operators_address(api):
    session = await console_signed_in(api)
    tenant, _ = await api.tenant(name="Corp")
    code, listed, _ = await session.json("GET", "/console/admin/v1/tenants?q=cor")
    assert code == 200 and [t["id"] for t in listed["data"]] == [tenant["id"]]
    code, changed, _ = await session.json("PATCH", f"/console/admin/v1/tenants/{tenant['id']}",
                                          json={"status": "suspended", "status_reason": "abuse report 12"})
    assert code == 200 and changed["status"] == "suspended" and changed["status_reason"] == "abuse report 12"
    code, usage, _ = await session.json("GET", f"/console/admin/v1/tenants/{tenant['id']}/usage")
    assert code == 200 and usage["object"] == "usage"
    code, held, _ = await session.json("POST", "/console/admin/v1/queue/hold",
                                       json={"destination": "example.net", "reason": "blocklisted"})
    assert code == 200, held
    code, body, _ = await session.json("POST", "/console/admin/v1/operators", json={"email": "two@example.com"})
    assert code == 201, body
    code, audit, _ = await session.json("GET", "/console/admin/v1/audit")
    assert code == 200
    mine = [(e["actor"], e["action"]) for e in audit["data"]]
    assert mine[:3] == [("operator:ops@example.com", "operator.link"), ("operator:ops@example.com", "queue.hold"),
                        ("operator:ops@example.com", "tenant.update")], mine
    assert audit["data"][2]["detail"]["changes"] == {"status": "suspended", "status_reason": "abuse report 12"}


@pt.ensureDeferred
async def test_the_console_page_is_served_under_the_strict_policy(api):
    response, body = await api.request("GET", "/console/")
    assert response.code == 200 and b'src="/ui/console/app.js"' in body
    policy = response.headers.getRawHeaders("content-security-policy")[0]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    response, body = await api.request("GET", "/ui/console/app.js")
    assert response.code == 200 and b"import" in body
    response, _ = await api.request("GET", "/console", allow_redirects=False)
    assert response.code == 302 and response.headers.getRawHeaders("location") == ["/console/"]
