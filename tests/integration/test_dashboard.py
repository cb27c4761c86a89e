"""
The dashboard's HTTP side: users, sign-in, cookie sessions, CSRF, CORS, /me and
/dashboard/* on the real PostgreSQL; the browser tests are in test_dashboard_browser.py.
"""

from __future__ import annotations

import gc
import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, task
from twisted.names.dns import TXT

import mailsvc.web
from mailsvc import first_account, runners
from mailsvc.config import load
from mailsvc.http.access.base import SAFE_METHODS
from mailsvc.http.router import SESSION
from mailsvc.ids import uuid7
from mailsvc.mail import inspection
from mailsvc.store import accounts
from mailsvc.store import inbox as inbox_store
from mailsvc.store.notify import Notifications
from tests.helpers import knobs
from tests.helpers.broadcasts import contacts, create, run_fanout
from tests.helpers.dashboard import PASSWORD, Session, cookie_of, first_user, link_token, signed_in
from tests.helpers.domainsupport import publish
from tests.helpers.mime_limits import largest_allowed, too_many_parts
from tests.helpers.sending import BODY, sending_tenant

LISTED = "https://dash.example.com"
OTHER = "https://evil.example"


@pytest.fixture
def config(dns_server, request):
    """A listed dashboard origin; names resolve through the test DNS server (webhook endpoints).
    A test may add settings (``indirect`` parametrization: environment names)."""
    dns_server.a("hooks.example.com", "8.8.8.8")
    environ = {**knobs.NODE, "MAILSVC_DASHBOARD_ORIGINS": f"{LISTED}/", **getattr(request, "param", {})}
    return dns_server.configure(load(None, environ=environ))


async def login(api, email: str, password: str, **kwargs):
    return await api.json("POST", "/auth/login", json={"email": email, "password": password}, **kwargs)


@pt.ensureDeferred
async def test_operator_creates_the_first_user_whose_link_sets_a_password_once(api):
    tenant, _, user = await first_user(api, "Owner@Example.COM")
    assert user["email"] == "owner@example.com" and user["role"] == "owner" and user["status"] == "invited"
    assert user["tenant_id"] == tenant["id"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui/#/set-password/[\w-]+", user["set_password_url"])
    # The same address again: one user per address.
    code, body, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                   json={"email": "owner@example.com"})
    assert code == 409
    code, body, _ = await api.json("POST", "/admin/v1/tenants/0190e6c4-0000-7000-8000-000000000000/users",
                                   api.operator_token, json={"email": "x@example.com"})
    assert code == 404
    code, body, _ = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": "short"})
    assert code == 422 and body["name"] == "validation_error"
    code, body, response = await api.json("POST", "/auth/password",
                                          json={"token": link_token(user), "password": PASSWORD})
    assert code == 200 and body["email"] == "owner@example.com" and body["csrf_token"]
    # The link worked once.
    code, body, _ = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": PASSWORD})
    assert code == 401 and body == {"statusCode": 401, "name": "invalid_credentials",
                                    "message": "This link was already used; ask for a new one."}
    code, body, _ = await api.json("POST", "/auth/password", json={"token": "x" * 40, "password": PASSWORD})
    assert code == 401
    # Only the argon2id hash is stored (at the cheapest parameters: the tests' knob, tests/helpers/knobs.py).
    row = await api.parts.db.fetchone("SELECT password_hash FROM users")
    assert row["password_hash"].startswith("$argon2id$v=19$m=8,t=1,p=1$") and PASSWORD not in row["password_hash"]


@pt.ensureDeferred
async def test_sign_in_cookie_attributes_me_and_sign_out(api):
    tenant, _, session = await signed_in(api)
    code, body, response = await login(api, "OWNER@example.com", PASSWORD)
    assert code == 200
    header, token = cookie_of(response)
    # Plain HTTP on loopback (this test): Secure is dropped, everything else is there.
    attributes = [a.strip() for a in header.split(";")]
    assert attributes[0] == f"mailsvc_session={token}" and len(token) >= 40
    assert {"HttpOnly", "SameSite=Lax", "Path=/"} <= set(attributes) and "Secure" not in attributes
    # Any other host (a proxy in front, a real name): Secure.
    code, _, response = await login(api, "owner@example.com", PASSWORD, headers={"Host": "mail.example.com"})
    header, _ = cookie_of(response)
    assert code == 200 and {"Secure", "HttpOnly", "SameSite=Lax", "Path=/"} <= {a.strip() for a in header.split(";")}
    # Only a hash of the token is stored.
    rows = await api.parts.db.fetchall("SELECT token_hash FROM sessions")
    assert all(token.encode() not in bytes(r["token_hash"]) for r in rows)

    me = Session(api, token, body["csrf_token"], body)
    code, got, response = await me.json("GET", "/me")
    assert code == 200 and got["email"] == "owner@example.com" and got["role"] == "owner"
    assert got["account"]["id"] == tenant["id"] and got["account"]["plan"] == tenant["plan"]
    assert got["usage"] == {"day": 0, "daily_quota": tenant["daily_quota"], "month": 0,
                            "monthly_quota": tenant["monthly_quota"]}
    assert got["csrf_token"] == body["csrf_token"]
    assert response.headers.getRawHeaders("cache-control") == ["no-store"]

    code, out, response = await me.json("POST", "/auth/logout")
    assert code == 200 and cookie_of(response)[1] == ""
    code, err, _ = await me.json("GET", "/me")
    assert code == 401 and err["name"] == "session_required"
    # The other session lives on.
    assert (await session.json("GET", "/me"))[0] == 200


@pt.ensureDeferred
async def test_refusals_do_not_tell_whether_an_address_exists(api):
    await signed_in(api)
    wrong = await login(api, "owner@example.com", "not the password")
    unknown = await login(api, "nobody@example.com", "not the password")
    malformed = await login(api, "not an address", "x")
    for code, body, _ in (wrong, unknown, malformed):
        assert code == 401 and body == {"statusCode": 401, "name": "invalid_credentials",
                                        "message": "The e-mail address or the password is wrong."}


@pt.ensureDeferred
async def test_failed_sign_ins_are_throttled_per_address_and_per_client(api):
    await signed_in(api)
    started = time.monotonic()
    for _ in range(5):
        assert (await login(api, "owner@example.com", "wrong password"))[0] == 401
    # The address is throttled, even with the right password; another address is not.
    code, body, response = await login(api, "owner@example.com", PASSWORD)
    assert code == 429 and body["name"] == "rate_limit_exceeded"
    assert int(response.headers.getRawHeaders("retry-after")[0]) > 0
    assert (await login(api, "nobody@example.com", "wrong password"))[0] == 401
    # An unknown address is throttled alike (nothing tells it apart).
    for _ in range(4):
        await login(api, "nobody@example.com", "wrong password")
    assert (await login(api, "nobody@example.com", "wrong password"))[0] == 429
    # One client trying many addresses: 20 failures, then refused for any address. The client's
    # limit gives one try back every 15 s, so a slow machine (each failure is an argon2 check)
    # may see a few more before the refusal: as many as the time taken allows, no more.
    failures = 10
    while (await login(api, f"other{failures}@example.com", "wrong password"))[0] == 401:
        failures += 1
        assert failures <= 20 + (time.monotonic() - started) // 15 + 1, failures
    assert failures >= 20
    assert (await login(api, "fresh@example.com", "wrong password"))[0] == 429


@pt.ensureDeferred
async def test_concurrent_wrong_sign_ins_cannot_pass_the_throttle_together(api):
    await signed_in(api)
    # Right passwords are not counted: more than the address's 5 in a row all sign in.
    for _ in range(6):
        assert (await login(api, "owner@example.com", PASSWORD))[0] == 200
    # 60 wrong passwords at once: each is counted before its password is checked.
    attempts = [defer.ensureDeferred(login(api, "owner@example.com", "wrong password")) for _ in range(60)]
    codes = [code for code, _, _ in await defer.gatherResults(attempts)]
    assert codes.count(401) == 5 and codes.count(429) == 55, codes
    # The refused ones counted nothing against the client network (5 of its 20 are used).
    assert (await login(api, "other@example.com", "wrong password"))[0] == 401


@pt.ensureDeferred
async def test_expired_idle_and_revoked_sessions_get_401(api):
    _, _, first = await signed_in(api)
    _, second_body, response = await login(api, "owner@example.com", PASSWORD)
    second = Session(api, cookie_of(response)[1], second_body["csrf_token"], second_body)
    _, third_body, response = await login(api, "owner@example.com", PASSWORD)
    third = Session(api, cookie_of(response)[1], third_body["csrf_token"], third_body)
    db = api.parts.db
    for s in (first, second, third):
        assert (await s.json("GET", "/dashboard/api-keys"))[0] == 200
    await db.execute("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = "
                     "(SELECT id FROM sessions ORDER BY id LIMIT 1)")
    await db.execute("UPDATE sessions SET last_seen_at = now() - interval '3 hours' WHERE id = "
                     "(SELECT id FROM sessions ORDER BY id LIMIT 1 OFFSET 1)")
    for s in (first, second):
        code, body, _ = await s.json("GET", "/dashboard/api-keys")
        assert code == 401 and body["name"] == "session_required"
    assert (await third.json("GET", "/me"))[0] == 200
    # A password change ends every session of the user (the new one is handed back).
    code, changed, response = await third.json("POST", "/dashboard/password",
                                               json={"current_password": PASSWORD, "password": "a new long password"})
    assert code == 200
    assert (await third.json("GET", "/me"))[0] == 401
    fourth = Session(api, cookie_of(response)[1], changed["csrf_token"], changed)
    assert (await fourth.json("GET", "/me"))[0] == 200
    assert (await login(api, "owner@example.com", PASSWORD))[0] == 401
    # No cookie, or a made-up one.
    assert (await api.json("GET", "/me"))[0] == 401
    assert (await Session(api, "made-up", "x", {}).json("GET", "/dashboard/api-keys"))[0] == 401


def session_routes(router) -> list[tuple[str, str]]:
    """(method, path with sample ids) of every state-changing route a session may call."""
    return sorted((m.method, re.sub(r"<(?:path:)?\w+>", str(uuid.uuid4()), m.path)) for m in router.mounted
                  if m.access == SESSION and m.method.encode() not in SAFE_METHODS)


@pt.ensureDeferred
async def test_a_cookie_without_its_csrf_token_is_refused_on_every_state_changing_route(api):
    _, _, session = await signed_in(api)
    routes = session_routes(api.parts.router)
    paths = {p for _, p in routes}
    assert len(routes) >= 30 and "/auth/logout" in paths and "/dashboard/users" in paths
    assert any(p.startswith("/dashboard/emails") for p in paths)
    assert any(p.startswith("/dashboard/api-keys") for p in paths)
    # The contacts API is served to the session too, every write of it guarded.
    methods = {(m, re.sub(r"[0-9a-f-]{36}", "{id}", p)) for m, p in routes}
    assert {
        ("POST", "/dashboard/contacts"), ("POST", "/dashboard/contacts/batch"), ("PATCH", "/dashboard/contacts/{id}"),
        ("DELETE", "/dashboard/contacts/{id}"), ("POST", "/dashboard/contacts/{id}/segments/{id}"),
        ("DELETE", "/dashboard/contacts/{id}/segments/{id}"), ("POST", "/dashboard/segments"),
        ("PATCH", "/dashboard/segments/{id}"), ("DELETE", "/dashboard/segments/{id}"),
    } <= methods
    for method, path in routes:
        for headers in ({}, {"X-CSRF-Token": "forged"}, {"X-CSRF-Token": session.csrf + "x"}):
            code, body, _ = await session.json(method, path, csrf=False, json={}, headers=headers)
            assert (code, body["name"]) == (403, "invalid_csrf_token"), (method, path, headers)
    # With the token, from another site's page: refused too.
    code, body, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "x"}, headers={"Origin": OTHER})
    assert code == 403
    # With the token: it works (the same handler as POST /api-keys).
    code, body, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "from the dashboard"})
    assert code == 200 and body["token"].startswith("re_") and set(body) == {"object", "id", "token"}
    # A sign-in posted from another site's page is refused.
    code, body, _ = await login(api, "owner@example.com", PASSWORD, headers={"Origin": OTHER})
    assert code == 403 and body["name"] == "invalid_origin"


@pt.ensureDeferred
async def test_a_dashboard_error_names_its_native_code_beside_its_name(api):
    """The page can say "not verified (domain_not_verified)" where the main name is validation_error."""
    _, key, session = await signed_in(api)
    send = {"from": "a@unverified.io", "to": "b@elsewhere.io", "subject": "s", "text": "t"}
    code, body, _ = await session.json("POST", "/dashboard/emails", json=send)
    assert (code, body["name"], body["code"]) == (403, "validation_error", "domain_not_verified"), body
    # The main API's envelope is {statusCode, name, message}, nothing more; a code that is the name is not repeated.
    code, body, _ = await api.json("POST", "/emails", json=send, key=key)
    assert code == 403 and set(body) == {"statusCode", "name", "message"}
    code, body, _ = await session.json("GET", f"/dashboard/emails/{uuid.uuid4()}")
    assert code == 404 and set(body) == {"statusCode", "name", "message"}


@pt.ensureDeferred
async def test_the_origin_check_compares_the_scheme_too(api):
    _, _, session = await signed_in(api)
    here = api.url.split("://", 1)[1]  # plain HTTP on loopback: the pages are http://
    code, body, _ = await login(api, "owner@example.com", PASSWORD, headers={"Origin": f"https://{here}"})
    assert (code, body["name"]) == (403, "invalid_origin")
    code, _, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "x"},
                                    headers={"Origin": f"https://{here}"})
    assert code == 403
    assert (await login(api, "owner@example.com", PASSWORD, headers={"Origin": f"http://{here}"}))[0] == 200
    # Any other Host: TLS here or at a proxy in front, so the pages are https:// (the cookie is Secure).
    proxied = {"Host": "mail.example.com"}
    code, _, _ = await login(api, "owner@example.com", PASSWORD,
                             headers={**proxied, "Origin": "http://mail.example.com"})
    assert code == 403
    code, _, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "x"},
                                    headers={**proxied, "Origin": "http://mail.example.com"})
    assert code == 403
    code, _, _ = await login(api, "owner@example.com", PASSWORD,
                             headers={**proxied, "Origin": "https://mail.example.com"})
    assert code == 200
    code, _, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "x"},
                                    headers={**proxied, "Origin": "https://mail.example.com"})
    assert code == 200


@pt.ensureDeferred
async def test_a_session_of_one_account_gets_404_on_another_accounts_ids(api):
    _, key_a, session_a = await signed_in(api, "a@example.com")
    _, key_b, _ = await sending_tenant(api, "beta.example.com")
    _, domain_b, _ = await api.json("GET", "/domains", key_b)
    domain_id = domain_b["data"][0]["id"]
    _, sent, _ = await api.json("POST", "/emails", key_b, json={**BODY, "from": "b@beta.example.com"})
    _, hook, _ = await api.json("POST", "/webhooks", key_b,
                                json={"endpoint": "https://hooks.example.com/x", "events": ["email.sent"]})
    _, keys_b, _ = await api.json("GET", "/api-keys", key_b)
    key_id = keys_b["data"][0]["id"]
    for method, path in [
        ("GET", f"/dashboard/domains/{domain_id}"), ("GET", f"/dashboard/domains/{domain_id}/dns"),
        ("POST", f"/dashboard/domains/{domain_id}/verify"), ("DELETE", f"/dashboard/domains/{domain_id}"),
        ("GET", f"/dashboard/emails/{sent['id']}"), ("GET", f"/dashboard/emails/{sent['id']}/events"),
        ("GET", f"/dashboard/emails/{sent['id']}/html"),
        ("GET", f"/dashboard/webhooks/{hook['id']}"), ("PATCH", f"/dashboard/webhooks/{hook['id']}"),
        ("GET", f"/dashboard/webhooks/{hook['id']}/deliveries"),
        ("DELETE", f"/dashboard/api-keys/{key_id}"), ("PATCH", f"/dashboard/api-keys/{key_id}"),
    ]:
        code, body, _ = await session_a.json(method, path, json={"name": "x"})
        if path.endswith("/deliveries"):
            assert (code, body["data"]) == (200, []), path  # a filter on the account: nothing of B's
        else:
            assert code == 404 and body["name"] == "not_found", (method, path, body)
    # B's key still works, B's domain is still there.
    assert (await api.json("GET", f"/domains/{domain_id}", key_b))[0] == 200


@pt.ensureDeferred
async def test_cors_answers_with_credentials_only_for_the_dashboard_origins(api):
    _, _, session = await signed_in(api)

    def cors(response) -> dict:
        return {k.decode().lower(): v[0].decode() for k, v in response.headers.getAllRawHeaders()
                if k.lower().startswith(b"access-control")}

    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-csrf-token"}
    response, _ = await api.request("OPTIONS", "/dashboard/api-keys", headers={"Origin": LISTED, **preflight})
    assert response.code == 204 and cors(response) == {
        "access-control-allow-origin": LISTED, "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, POST", "access-control-max-age": "600",
        "access-control-allow-headers": "Content-Type, X-Request-Id, X-CSRF-Token",
        "access-control-expose-headers": "X-Request-Id"}
    code, _, response = await session.json("GET", "/me", headers={"Origin": LISTED})
    assert code == 200 and cors(response)["access-control-allow-credentials"] == "true"
    code, _, response = await session.json("POST", "/dashboard/api-keys", json={"name": "x"},
                                           headers={"Origin": LISTED})
    assert code == 200 and cors(response)["access-control-allow-origin"] == LISTED
    for origin in (OTHER, LISTED + ".evil.example", "null"):
        response, _ = await api.request("OPTIONS", "/auth/login", headers={"Origin": origin, **preflight})
        assert cors(response) == {}
        code, _, response = await session.json("GET", "/me", headers={"Origin": origin})
        assert cors(response) == {}
        code, _, response = await login(api, "owner@example.com", PASSWORD, headers={"Origin": origin})
        assert code == 403 and cors(response) == {}
    # The main API still answers no CORS at all.
    response, _ = await api.request("GET", "/api-keys", headers={"Origin": LISTED})
    assert cors(response) == {}


@pt.ensureDeferred
async def test_dashboard_serves_the_api_handlers_under_the_shared_rate_limit(api):
    tenant, key, session = await signed_in(api)
    code, made, _ = await session.json("POST", "/dashboard/api-keys", json={"name": "Production"})
    assert code == 200
    _, by_key, _ = await api.json("GET", "/api-keys", key)
    _, by_session, _ = await session.json("GET", "/dashboard/api-keys")
    # The same list, and who made each key (test_the_dashboard_shows_who_made_each_key).
    assert [{f: v for f, v in k.items() if f != "created_by"} for k in by_session["data"]] == by_key["data"]
    assert {k["name"] for k in by_session["data"]} == {"Default", "Production"}
    # Errors in the main shape.
    code, body, _ = await session.json("POST", "/dashboard/domains", json={"name": "not a domain"})
    assert code == 422 and set(body) == {"statusCode", "name", "message"}
    # One rate for the account's keys and sessions: 1/s with a burst of 2.
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"api_rate_per_sec": 1})
    api.parts.keyring.forget_tenant(uuid.UUID(tenant["id"]))
    codes = [(await api.json("GET", "/api-keys", key))[0] for _ in range(2)]
    codes.append((await session.json("GET", "/dashboard/api-keys"))[0])
    assert codes == [200, 200, 429]


@pt.ensureDeferred
async def test_a_preview_frame_load_is_not_counted_against_the_rate(api):
    tenant, _, session = await signed_in(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token, json={"api_rate_per_sec": 1})
    api.parts.keyring.forget_tenant(uuid.UUID(tenant["id"]))
    code, kept, _ = await session.json("POST", "/dashboard/previews", json={"html": "<p>Hello</p>"})
    assert code == 200, kept
    # The frame's loads (which cannot wait out a 429) are free; the page's own calls are not.
    cookie = {"Cookie": f"mailsvc_session={session.token}"}
    for _ in range(4):
        response, body = await api.request("GET", kept["url"], headers=cookie)
        assert (response.code, body) == (200, b"<p>Hello</p>")
    codes = [(await session.json("GET", "/me"))[0] for _ in range(3)]
    assert 429 in codes, codes
    # Still the session's: no cookie, no preview.
    response, _ = await api.request("GET", kept["url"])
    assert response.code == 401


@pt.ensureDeferred
async def test_contacts_and_segments_are_served_to_the_session(api):
    _, key, session = await signed_in(api)
    code, segment, _ = await session.json("POST", "/dashboard/segments", json={"name": "VIP"})
    assert code == 201
    code, reply, _ = await session.json("POST", "/dashboard/contacts/batch", json={
        "contacts": [{"email": "ann@example.com", "first_name": "Ann"}, {"email": "no address"}],
        "segment_id": segment["id"]})
    assert code == 200 and [r["index"] for r in reply["data"]] == [0] and reply["errors"][0]["index"] == 1
    code, found, _ = await session.json("GET", "/dashboard/contacts?q=an&limit=10")
    assert code == 200 and [c["email"] for c in found["data"]] == ["ann@example.com"]
    ann = found["data"][0]["id"]
    code, _, _ = await session.json("PATCH", f"/dashboard/contacts/{ann}", json={"properties": {"age": 30}})
    assert code == 200
    # The same rows as the key sees.
    code, by_key, _ = await api.json("GET", f"/contacts/{ann}", key)
    assert by_key["properties"] == {"age": {"value": 30, "type": "number"}}
    code, members, _ = await session.json("GET", f"/dashboard/segments/{segment['id']}/contacts")
    assert [c["id"] for c in members["data"]] == [ann]
    # Another account's session sees none of it.
    _, _, other = await signed_in(api, "b@example.com")
    for method, path in (("GET", f"/dashboard/contacts/{ann}"), ("PATCH", f"/dashboard/contacts/{ann}"),
                         ("DELETE", f"/dashboard/segments/{segment['id']}"),
                         ("POST", f"/dashboard/contacts/{ann}/segments/{segment['id']}")):
        code, body, _ = await other.json(method, path, json={"first_name": "x"})
        assert code == 404 and body["name"] == "not_found", (method, path, body)
    assert (await other.json("GET", "/dashboard/contacts"))[1]["data"] == []


@pt.ensureDeferred
async def test_owners_invite_members_who_cannot_manage_users(api):
    _, _, owner = await signed_in(api)
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "mia@example.com"})
    assert code == 201 and invited["role"] == "member" and invited["status"] == "invited"
    code, body, response = await api.json("POST", "/auth/password",
                                          json={"token": link_token(invited), "password": PASSWORD})
    member = Session(api, cookie_of(response)[1], body["csrf_token"], body)
    code, listed, _ = await member.json("GET", "/dashboard/users")
    assert code == 200 and [(u["email"], u["status"]) for u in listed["data"]] == [
        ("owner@example.com", "active"), ("mia@example.com", "active")]
    code, body, _ = await member.json("POST", "/dashboard/users", json={"email": "x@example.com"})
    assert code == 403
    code, body, _ = await member.json("DELETE", f"/dashboard/users/{owner.user['id']}")
    assert code == 403
    # An owner's reset link for the member; removing the member ends their sessions.
    code, reset, _ = await owner.json("POST", f"/dashboard/users/{invited['id']}/password-link")
    assert code == 200 and reset["set_password_url"] != invited["set_password_url"]
    code, _, _ = await owner.json("DELETE", f"/dashboard/users/{invited['id']}")
    assert code == 200 and (await member.json("GET", "/me"))[0] == 401


async def member(api, owner: Session, email: str) -> Session:
    """A member invited by ``owner``, signed in."""
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": email})
    assert code == 201
    code, body, response = await api.json("POST", "/auth/password",
                                          json={"token": link_token(invited), "password": PASSWORD})
    return Session(api, cookie_of(response)[1], body["csrf_token"], body)


@pt.ensureDeferred
async def test_the_dashboard_shows_who_made_each_key(api):
    _, key, owner = await signed_in(api)
    mia = await member(api, owner, "mia@example.com")
    assert (await mia.json("POST", "/dashboard/api-keys", json={"name": "Mia's"}))[0] == 200
    assert (await api.json("POST", "/api-keys", key, json={"name": "By a key"}))[0] == 200
    code, listed, _ = await owner.json("GET", "/dashboard/api-keys")
    assert code == 200 and {k["name"]: k["created_by"] for k in listed["data"]} == {
        "Default": {"type": "operator"}, "By a key": {"type": "api"},
        "Mia's": {"type": "user", "user_id": mia.user["id"], "email": "mia@example.com"}}
    # The main API's list items keep their fields (id, name, created_at, last_used_at).
    _, by_key, _ = await api.json("GET", "/api-keys", key)
    assert {tuple(sorted(k)) for k in by_key["data"]} == {("created_at", "id", "last_used_at", "name")}
    _, native, _ = await api.json("GET", "/v1/api-keys", key)
    assert not any("created_by" in k for k in native["data"])


@pt.ensureDeferred
async def test_removing_a_member_may_revoke_the_keys_they_made(api):
    _, key, owner = await signed_in(api)
    mia, max_ = await member(api, owner, "mia@example.com"), await member(api, owner, "max@example.com")
    _, mias, _ = await mia.json("POST", "/dashboard/api-keys", json={"name": "Mia's"})
    _, maxs, _ = await max_.json("POST", "/dashboard/api-keys", json={"name": "Max's"})
    _, owners, _ = await owner.json("POST", "/dashboard/api-keys", json={"name": "Owner's"})
    assert (await api.json("GET", "/domains", mias["token"]))[0] == 200  # checked, so cached on this node
    code, body, _ = await owner.json("DELETE", f"/dashboard/users/{mia.user['id']}?revoke_keys=maybe")
    assert code == 422 and (await mia.json("GET", "/me"))[0] == 200
    # Mia leaves, her key with her: it no longer works (at once on this node, within the key
    # cache's time on the others), nobody else's key is touched.
    code, body, _ = await owner.json("DELETE", f"/dashboard/users/{mia.user['id']}?revoke_keys=true")
    assert code == 200 and body["revoked_keys"] == [mias["id"]]
    assert (await api.json("GET", "/domains", mias["token"]))[0] == 403
    for token in (maxs["token"], owners["token"], key):
        assert (await api.json("GET", "/domains", token))[0] == 200
    # Max leaves, his key stays (the owner chose so), still showing who made it.
    code, body, _ = await owner.json("DELETE", f"/dashboard/users/{max_.user['id']}")
    assert code == 200 and body["revoked_keys"] == [] and (await max_.json("GET", "/me"))[0] == 401
    assert (await api.json("GET", "/domains", maxs["token"]))[0] == 200
    _, listed, _ = await owner.json("GET", "/dashboard/api-keys")
    assert {k["name"]: k["created_by"] for k in listed["data"]}["Max's"] == {
        "type": "user", "user_id": None, "email": "max@example.com"}


@pt.ensureDeferred
async def test_removing_a_member_with_their_keys_tells_every_process(api):
    """The NOTIFY every process's key cache follows (tests/integration/test_apikeys.py) is sent by the removal."""
    tenant, _, owner = await signed_in(api)
    mia, max_ = await member(api, owner, "mia@example.com"), await member(api, owner, "max@example.com")
    await mia.json("POST", "/dashboard/api-keys", json={"name": "Mia's"})
    await max_.json("POST", "/dashboard/api-keys", json={"name": "Max's"})
    heard = []
    other_process = Notifications(api.parts.db)
    await other_process.listen(accounts.KEYS_CHANNEL, heard.append)
    try:
        code, body, _ = await owner.json("DELETE", f"/dashboard/users/{max_.user['id']}")  # keys kept: nothing to tell
        assert code == 200 and body["revoked_keys"] == []
        code, body, _ = await owner.json("DELETE", f"/dashboard/users/{mia.user['id']}?revoke_keys=true")
        assert code == 200 and len(body["revoked_keys"]) == 1
        for _ in range(20):
            if heard:
                break
            await task.deferLater(reactor, 0.05, lambda: None)
        assert heard == [tenant["id"]]
    finally:
        other_process.stop()


@pt.ensureDeferred
async def test_dashboard_reads_timeline_stats_preview_and_search(api):
    tenant, key, domain_id = await sending_tenant(api)
    code, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                   json={"email": "owner@example.com"})
    _, body, response = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": PASSWORD})
    session = Session(api, cookie_of(response)[1], body["csrf_token"], body)
    _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "subject": "Invoice <b>42</b>"})
    code, timeline, _ = await session.json("GET", f"/dashboard/emails/{sent['id']}/events")
    assert code == 200 and [e["type"] for e in timeline["data"]] == ["email.sent"]  # no delivery worker here
    assert timeline["deliveries"][0]["recipient"] == "ann@example.com"
    response, html = await api.request("GET", f"/dashboard/emails/{sent['id']}/html",
                                       headers={"Cookie": f"mailsvc_session={session.token}"})
    assert response.code == 200 and html == b"<p>Hi Ann</p>"
    csp = response.headers.getRawHeaders("content-security-policy")[0]
    assert "sandbox" in csp and "script-src" not in csp and "default-src 'none'" in csp
    code, found, _ = await session.json("GET", "/dashboard/search/emails?q=invoice")
    assert [e["id"] for e in found["data"]] == [sent["id"]]
    assert (await session.json("GET", "/dashboard/search/emails?q=nothing%25"))[1]["data"] == []
    code, stats, _ = await session.json("GET", "/dashboard/stats")
    assert code == 200 and len(stats["days"]) == 30 and stats["days"][-1]["sent"] == 1
    assert stats["usage"]["day"] == 1
    code, dns, _ = await session.json("GET", f"/dashboard/domains/{domain_id}/dns")
    assert code == 200 and {r["live"] for r in dns["data"]} <= {"match", "mismatch", "temporary"}
    _, me, _ = await session.json("GET", "/me")
    assert me["usage"]["day"] == 1


@pt.ensureDeferred
async def test_the_preview_of_a_broadcasts_email_is_its_recipients(api):
    """A broadcast's e-mail stores no html: the preview is built as GET /emails/{id} shows it."""
    tenant, key, _ = await sending_tenant(api)
    code, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                   json={"email": "owner@example.com"})
    _, body, response = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": PASSWORD})
    session = Session(api, cookie_of(response)[1], body["csrf_token"], body)
    b = await create(api, key, await contacts(api, key, 1), send=True)
    assert await run_fanout(api) == 1
    (row,) = await api.parts.db.fetchall("SELECT id, html FROM emails WHERE broadcast_id = %s", (b["id"],))
    _, got, _ = await api.json("GET", f"/emails/{row['id']}", key)
    assert row["html"] is None and "Hi F0 L0, plan free" in got["html"]
    response, html = await api.request("GET", f"/dashboard/emails/{row['id']}/html",
                                       headers={"Cookie": f"mailsvc_session={session.token}"})
    assert response.code == 200 and html.decode() == got["html"]


@pt.ensureDeferred
async def test_the_ui_is_served_under_ui_with_a_strict_policy(api):
    response, _ = await api.request("GET", "/", allow_redirects=False)
    assert response.code == 302 and response.headers.getRawHeaders("location") == ["/ui/"]
    response, page = await api.request("GET", "/ui/")
    assert response.code == 200 and b'<script type="module" src="/ui/app.js"></script>' in page
    csp = response.headers.getRawHeaders("content-security-policy")[0]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert b"<script>" not in page and b" on" not in page.lower().replace(b" one", b"")
    response, script = await api.request("GET", "/ui/app.js")
    assert response.code == 200 and response.headers.getRawHeaders("content-type") == ["text/javascript; charset=utf-8"]
    assert b"innerHTML" not in script
    # Every module is served, the pages' too, and none writes markup.
    web = Path(mailsvc.web.__file__).parent
    modules = sorted(p.relative_to(web).as_posix() for p in web.rglob("*.js"))
    assert "ui.js" in modules and "pages/domains.js" in modules
    for name in modules:
        response, script = await api.request("GET", f"/ui/{name}")
        assert response.code == 200 and b"innerHTML" not in script and b"insertAdjacentHTML" not in script, name
    # The favicon is the page's own (nothing asks for /favicon.ico).
    assert b'<link rel="icon" href="/ui/favicon.svg" type="image/svg+xml">' in page
    response, icon = await api.request("GET", "/ui/favicon.svg")
    assert response.code == 200 and response.headers.getRawHeaders("content-type") == ["image/svg+xml"]
    assert icon.startswith(b"<svg") and b"<script" not in icon
    for path in ("/nope", "/ui/nope.js", "/ui/../setup.cfg", "/emailsx"):
        code, body, _ = await api.json("GET", path)
        assert code == 404 and body["name"] == "not_found", path


def first_start(config, state_dir, **dashboard):
    """``config`` as a start with its state in ``state_dir`` and these dashboard settings."""
    return attrs.evolve(config, state=attrs.evolve(config.state, dir=str(state_dir)),
                        dashboard=attrs.evolve(config.dashboard, first_user="admin@example.com", **dashboard))


@pt.ensureDeferred
async def test_a_development_start_keeps_the_first_accounts_key_in_a_private_file_once(api, db, config, tmp_path):
    development = first_start(config, tmp_path, first_key_file=True)
    first, path = await first_account.first_account(development, api.parts.dashboard, db,
                                              api.parts.accounts.create_tenant)
    assert path == tmp_path / "api-key" and oct(path.stat().st_mode & 0o777) == "0o600"
    key = path.read_text().strip()
    code, keys, _ = await api.json("GET", "/api-keys", key)
    assert code == 200 and [k["name"] for k in keys["data"]] == ["first key (scripts/serve)"]
    code, usage, _ = await api.json("GET", "/v1/usage", key)
    assert usage["tenant_id"] == str(first.user["tenant_id"]) and first.user["role"] == "owner"
    assert first.password_token is not None

    # A second start: the same account and file, neither made again; the link while no password.
    written, mtime = path.read_bytes(), path.stat().st_mtime_ns
    again, path_again = await first_account.first_account(development, api.parts.dashboard, db,
                                                    api.parts.accounts.create_tenant)
    assert again.api_key is None and again.user["id"] == first.user["id"] and again.password_token
    assert path_again == path and path.read_bytes() == written and path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("settings", [
    {"first_key_file": False},  # a packaged install: first_user at most
    {"first_key_file": True, "dsn": "host=/elsewhere dbname=mailsvc"},  # not the embedded store
])
@pt.ensureDeferred
async def test_no_account_key_is_written_to_disk_but_by_a_development_start_on_the_embedded_store(
        api, db, config, tmp_path, settings):
    start = first_start(config, tmp_path, first_key_file=settings["first_key_file"])
    start = attrs.evolve(start, database=attrs.evolve(start.database, dsn=settings.get("dsn", "")))
    first, path = await first_account.first_account(start, api.parts.dashboard, db, api.parts.accounts.create_tenant)
    assert first.password_token is not None and path is None and list(tmp_path.iterdir()) == []
    code, keys, _ = await api.json("GET", "/api-keys", first.api_key)
    assert [k["name"] for k in keys["data"]] == ["Default"]


@pytest.mark.parametrize(("config", "reason"), [
    ({"MAILSVC_MAIL_HOSTNAME": "mail.example.net"}, None),
    ({"MAILSVC_MAIL_HOSTNAME": "localhost"}, "The node's mail hostname is 'localhost': "),
    ({"MAILSVC_MAIL_HOSTNAME": "vm"}, "The node's mail hostname 'vm' has no dot: "),
], indirect=["config"])
@pt.ensureDeferred
async def test_the_dashboards_records_say_whether_the_nodes_hostname_lets_them_be_published(api, reason):
    tenant, key, session = await signed_in(api)
    _, domain, _ = await api.json("POST", "/domains", key, json={"name": "example.org"})
    code, dns, _ = await session.json("GET", f"/dashboard/domains/{domain['id']}/dns")
    assert code == 200 and dns["records_publishable"] is (reason is None)
    if reason is None:
        assert dns["unpublishable_reason"] is None
    else:
        assert dns["unpublishable_reason"].startswith(reason)
        assert dns["unpublishable_reason"].endswith("until mail.hostname is set to the node's public name.")
    # The API's domain keeps its shape: the records name the hostname, and nothing is added.
    _, same, _ = await api.json("GET", f"/domains/{domain['id']}", key)
    assert "records_publishable" not in same and "unpublishable_reason" not in same


@pt.ensureDeferred
async def test_the_inbox_lists_and_checks_what_stopped_at_the_door(mta):
    tenant, key, session = await signed_in(mta.api)
    await mta.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", mta.operator_token,
                   json={"delivery_mode": "capture", "send_rate_per_sec": 1000})
    _, domain, _ = await mta.json("POST", "/domains", key, json={"name": "acme.example.com"})
    publish(mta.dns, domain)  # the loopback DNS answers with the domain's records
    await mta.parts.db.execute("UPDATE domains SET status = 'verified'")
    captured = await mta.send(key, ["ann@example.net"], html="<p>Hi <b>Ann</b></p>", text="Hi Ann",
                              attachments=[{"filename": "a.txt", "content": "aGVsbG8="}])
    await mta.settled_past(captured)
    code, sent, _ = await mta.json("POST", "/emails", key, json={
        "from": "onboarding@resend.dev", "to": "delivered+x@resend.dev", "subject": "Trying", "html": "<p>T</p>"})
    assert code == 200, sent
    await mta.settled_past(sent["id"])

    code, listed, _ = await session.json("GET", "/dashboard/inbox")
    assert code == 200 and listed["has_more"] is False
    assert [(m["email_id"], m["outcome"], m["simulated"]) for m in listed["data"]] == [
        (sent["id"], "delivered", True), (captured, "captured", False)]
    code, first, _ = await session.json("GET", "/dashboard/inbox?limit=1")
    assert first["has_more"] is True and first["data"] == listed["data"][:1]
    _, rest, _ = await session.json("GET", f"/dashboard/inbox?limit=1&after={first['data'][0]['id']}")
    assert rest["data"] == listed["data"][1:] and rest["has_more"] is False

    code, real, _ = await session.json("GET", f"/dashboard/inbox/{listed['data'][1]['id']}")
    assert code == 200 and real["to"] == ["ann@example.net"]
    assert real["raw"].startswith("DKIM-Signature:") and real["html"].strip() == "<p>Hi <b>Ann</b></p>"
    assert real["text"].strip() == "Hi Ann" and [a["filename"] for a in real["attachments"]] == ["a.txt"]
    assert ["From", "Acme <news@acme.example.com>"] in real["headers"]
    checks = real["checks"]
    assert checks["simulated"] is False
    assert {(d["result"], d["domain"]) for d in checks["dkim"]} == {("pass", "acme.example.com")}
    assert len(checks["dkim"]) == 2  # an RSA and an Ed25519 signature
    assert checks["spf"]["result"] == "pass" and checks["spf"]["domain"].endswith(".acme.example.com")
    assert (checks["dmarc"]["result"], checks["dmarc"]["dkim_aligned"], checks["dmarc"]["spf_aligned"]) == (
        "pass", True, True)
    assert checks["list_unsubscribe"]["list_unsubscribe"] is None and checks["spam"] is None

    _, test, _ = await session.json("GET", f"/dashboard/inbox/{listed['data'][0]['id']}")
    checks = test["checks"]
    assert checks["simulated"] is True
    assert [(d["result"], d["domain"]) for d in checks["dkim"]] == [("pass", "resend.dev")]
    assert checks["spf"]["detail"].startswith("simulated") and checks["dmarc"]["detail"].startswith("simulated")
    assert checks["dkim"][0]["detail"] == "simulated: the signature verifies with this node's test key"
    assert checks["dmarc"]["result"] == "pass"

    response, html = await mta.request("GET", test["html_url"],
                                       headers={"Cookie": f"mailsvc_session={session.token}"})
    assert response.code == 200 and html.strip() == b"<p>T</p>"
    assert "sandbox" in response.headers.getRawHeaders("content-security-policy")[0]
    code, _, _ = await session.json("GET", f"/dashboard/inbox/{uuid.uuid4()}")
    assert code == 404
    # The checks are the published records': without the key, DKIM fails; without SPF too, DMARC.
    for record in domain["records"]:
        if "_domainkey" in record["name"]:
            mta.dns.remove(f"{record['name']}.acme.example.com")
    _, real, _ = await session.json("GET", f"/dashboard/inbox/{listed['data'][1]['id']}")
    assert [d["result"] for d in real["checks"]["dkim"]] == ["fail", "fail"]
    assert real["checks"]["dmarc"]["result"] == "pass"  # SPF, aligned
    mta.dns.remove(real["checks"]["spf"]["domain"], TXT)
    _, real, _ = await session.json("GET", f"/dashboard/inbox/{listed['data'][1]['id']}")
    assert real["checks"]["spf"]["result"] == "none" and real["checks"]["dmarc"]["result"] == "fail"


def test_an_inbox_preview_in_dark_mode_applies_the_message_dark_rules_only():
    html = ("<style>@media (prefers-color-scheme: dark) { body { background: #111 } }"
            "@media screen and ( Prefers-Color-Scheme : LIGHT ) { body { background: #fff } }</style>"
            "<p>prefers-color-scheme: dark is a query, not text to change</p>")
    assert inspection.as_dark(html) == (
        "<style>@media (min-width: 0px) { body { background: #111 } }"
        "@media screen and (max-width: -1px) { body { background: #fff } }</style>"
        "<p>prefers-color-scheme: dark is a query, not text to change</p>")


async def _kept_in_the_inbox(api, tenant: dict, message: bytes) -> str:
    """A message kept in the account's inbox as the door keeps one (or as an old row was kept)."""
    inbox_id = uuid7(time.time())
    await inbox_store.keep(api.parts.db, [inbox_store.entry(
        inbox_id, uuid.UUID(tenant["id"]), uuid7(time.time()), ["delivered+x@resend.dev"], "delivered",
        "onboarding@resend.dev", "Many parts", "resend.dev", "bounces@resend.dev", True, message,
        datetime.now(UTC))], 1000)
    return str(inbox_id)


@pt.ensureDeferred
@pytest.mark.timeout(120)
async def test_inbox_reads_of_the_largest_allowed_message_leave_the_reactor_free(api):
    """More reads at once than the pools have threads or processes: /healthz still answers at once."""
    tenant, _, session = await signed_in(api)
    inbox_id = await _kept_in_the_inbox(api, tenant, largest_allowed())
    count = max(reactor.getThreadPool().max, runners.PARSE_PROCESSES) + 2
    # The parsing processes started (by a node's first reads: they compete for the cores while
    # they start), then the reads at once.
    await defer.gatherResults([defer.ensureDeferred(session.json("GET", f"/dashboard/inbox/{inbox_id}"))
                               for _ in range(runners.PARSE_PROCESSES)])
    # Bytes only while the reads run (the client's JSON parse would be this reactor's work too).
    cookie = {"Cookie": f"mailsvc_session={session.token}"}
    gc.collect()  # a full collection of this test process's heap, not due in the middle of the reads
    reads = [defer.ensureDeferred(api.request("GET", f"/dashboard/inbox/{inbox_id}", headers=cookie))
             for _ in range(count)]
    idle = []
    for _ in range(5):  # how long /healthz takes on this machine now, reads or not
        started = time.perf_counter()
        await api.request("GET", "/healthz")
        idle.append(time.perf_counter() - started)
    await task.deferLater(reactor, 0.3, lambda: None)  # the reads under way
    waited = []
    while len(waited) < 5 and not all(r.called for r in reads):
        started = time.perf_counter()
        response, _ = await api.request("GET", "/healthz")
        waited.append(time.perf_counter() - started)
        assert response.code == 200
    assert not all(r.called for r in reads)  # each /healthz was answered while reads ran
    done = await defer.gatherResults(reads)
    # A reactor busy parsing holds most /healthz answers for a parse or more (the reads come back
    # together and the loop above ends early); a loaded machine slows every answer and may
    # stall one (a collector pass, another process on the cores): all but the slowest are bound.
    assert sorted(waited)[-2] < max(0.2, 10 * sorted(idle)[2]), (waited, idle)
    for response, body in done:
        read = json.loads(body)
        assert response.code == 200 and read["over_limit"] is None
        assert (read["html"], read["text"]) == ("<p>Hello <b>there</b></p>", "Hello there")
        assert len(read["attachments"]) == 497 and read["attachments"][0]["filename"] == "f0.bin"


@pt.ensureDeferred
async def test_an_inbox_message_over_a_limit_is_shown_as_its_source_naming_the_limit(api):
    tenant, _, session = await signed_in(api)
    message = too_many_parts(20_000)  # kept before the limits applied at submission
    inbox_id = await _kept_in_the_inbox(api, tenant, message)
    started = time.perf_counter()
    code, read, _ = await session.json("GET", f"/dashboard/inbox/{inbox_id}")
    assert time.perf_counter() - started < 10  # it was 20 s on a quiet machine, parsed
    assert code == 200 and read["raw"] == message.decode()
    assert read["over_limit"] == {"setting": "mail.max_mime_parts", "limit": 500, "message":
                                  "Not parsed: the message has more than 500 MIME parts (mail.max_mime_parts is 500)."}
    assert (read["html"], read["text"], read["attachments"], read["checks"]) == (None, None, [], None)
    response, _ = await api.request("GET", read["html_url"], headers={"Cookie": f"mailsvc_session={session.token}"})
    assert response.code == 404
    # Listed as any other message.
    code, listed, _ = await session.json("GET", "/dashboard/inbox")
    assert [m["id"] for m in listed["data"]] == [inbox_id]


@pt.ensureDeferred
async def test_the_dashboards_email_list_filters_by_status_and_text_a_page_at_a_time(api):
    tenant, key, domain_id = await sending_tenant(api)
    _, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                json={"email": "owner@example.com"})
    _, body, response = await api.json("POST", "/auth/password", json={"token": link_token(user), "password": PASSWORD})
    session = Session(api, cookie_of(response)[1], body["csrf_token"], body)
    ids = []
    for i in range(5):
        _, sent, _ = await api.json("POST", "/emails", key, json={**BODY, "subject": f"Receipt {i}"})
        ids.append(sent["id"])
    # Three bounced (0, 2, 4), two delivered; newest first is 4, 3, 2, 1, 0.
    await api.parts.db.execute("UPDATE emails SET last_event = CASE WHEN id::text = ANY(%s) THEN 'bounced'"
                               " ELSE 'delivered' END", ([ids[0], ids[2], ids[4]],))

    async def listed(query):
        code, found, _ = await session.json("GET", f"/dashboard/search/emails?{query}")
        assert code == 200, found
        return [ids.index(e["id"]) for e in found["data"]], found["has_more"]

    assert await listed("status=bounced") == ([4, 2, 0], False)
    assert await listed("status=bounced&limit=2") == ([4, 2], True)
    assert await listed(f"status=bounced&limit=2&after={ids[2]}") == ([0], False)
    assert await listed(f"status=bounced&limit=1&before={ids[0]}") == ([2], True)
    assert await listed("status=delivered&q=receipt") == ([3, 1], False)
    assert await listed(f"q={ids[3].upper()}") == ([3], False)  # an id, as pasted
    assert await listed("q=receipt 3&status=bounced") == ([], False)
    assert await listed("") == ([4, 3, 2, 1, 0], False)
    code, refused, _ = await session.json("GET", "/dashboard/search/emails?status=hard_bounce")
    assert code == 422 and "status" in refused["message"], refused
