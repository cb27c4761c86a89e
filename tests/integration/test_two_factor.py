"""
Two-factor sign-in (TOTP, RFC 6238) and one's own sessions, over HTTP against the assembled
application on the real PostgreSQL: enrolment, the second step of a sign-in (codes used once,
throttled like passwords), recovery codes, an owner's rule that every member enrols, the session
list, and every session ended by a password change, a removal or a suspension; the console's
operators alike. The codes are those of RFC 6238 in tests/unit/test_totp.py.
"""

from __future__ import annotations

import base64
import time

import pytest_twisted as pt

from mailsvc.domain import totp
from tests.helpers.console import PASSWORD as OPERATOR_PASSWORD
from tests.helpers.console import ConsoleSession, console_cookie, console_login, console_signed_in
from tests.helpers.dashboard import PASSWORD, Session, cookie_of, link_token, signed_in


def secret_of(enrolment: dict) -> bytes:
    text = enrolment["secret"]
    return base64.b32decode(text + "=" * (-len(text) % 8))


def code(secret: bytes, steps_ahead: int = 0) -> str:
    """The code of now's step, or of one ``steps_ahead`` (within the window: one step)."""
    return totp.code_at(secret, totp.step_of(time.time()) + steps_ahead)


def wrong(secret: bytes) -> str:
    """A code that is none of the window's."""
    near = {code(secret, n) for n in range(-2, 3)}
    return next(c for c in ("000000", "111111", "222222", "333333") if c not in near)


async def login(api, email: str, password: str = PASSWORD, **kwargs):
    return await api.json("POST", "/auth/login", json={"email": email, "password": password}, **kwargs)


async def second_step(api, challenge: dict, **body):
    return await api.json("POST", "/auth/login/two-factor", json={"challenge": challenge["challenge"], **body})


async def enrol(session, prefix: str = "/dashboard") -> tuple[bytes, list[str]]:
    """Two-factor sign-in turned on for a session's person: its secret and recovery codes."""
    status, begun, _ = await session.json("POST", f"{prefix}/two-factor/begin")
    assert status == 200, begun
    secret = secret_of(begun)
    status, confirmed, _ = await session.json("POST", f"{prefix}/two-factor/confirm", json={"code": code(secret)})
    assert status == 200, confirmed
    return secret, confirmed["recovery_codes"]


def session_of(api, response, body) -> Session:
    return Session(api, cookie_of(response)[1], body["csrf_token"], body)


@pt.ensureDeferred
async def test_enrol_then_sign_in_with_a_code_which_cannot_be_used_again(api):
    _, _, owner = await signed_in(api)
    status, state, _ = await owner.json("GET", "/dashboard/two-factor")
    assert status == 200 and state["enabled"] is False and state["required_by_account"] is False
    status, begun, _ = await owner.json("POST", "/dashboard/two-factor/begin")
    assert status == 200 and len(begun["secret"]) == 32
    assert begun["otpauth_uri"].startswith("otpauth://totp/mailsvc:owner%40example.com?")
    assert f"secret={begun['secret']}" in begun["otpauth_uri"]
    secret = secret_of(begun)
    # The secret is stored sealed, never as it is.
    row = await api.parts.db.fetchone("SELECT totp_pending FROM users")
    assert secret not in bytes(row["totp_pending"]) and begun["secret"].encode() not in bytes(row["totp_pending"])
    # Not on until a code of it is right.
    status, body, _ = await owner.json("POST", "/dashboard/two-factor/confirm", json={"code": wrong(secret)})
    assert status == 422 and body["name"] == "validation_error"
    assert (await login(api, "owner@example.com"))[1]["object"] == "user"
    status, confirmed, _ = await owner.json("POST", "/dashboard/two-factor/confirm", json={"code": code(secret)})
    codes = confirmed["recovery_codes"]
    assert status == 200 and confirmed["enabled"] is True and len(set(codes)) == 10
    row = await api.parts.db.fetchone("SELECT totp_secret, recovery_codes FROM users")
    assert len(row["recovery_codes"]) == 10 and all(c.encode() not in bytes(d) for c in codes
                                                     for d in row["recovery_codes"])
    assert (await owner.json("GET", "/dashboard/two-factor"))[1]["recovery_codes_left"] == 10
    assert (await owner.json("POST", "/dashboard/two-factor/begin"))[0] == 409

    # The password alone opens no session: a challenge, which the code completes.
    status, challenge, response = await login(api, "owner@example.com")
    assert status == 200 and challenge["object"] == "two_factor_challenge" and challenge["challenge"]
    assert response.headers.getRawHeaders("set-cookie") is None
    assert (await second_step(api, {"challenge": challenge["challenge"] + "x"}, code=code(secret, 1)))[0] == 401
    next_code = code(secret, 1)  # the confirmation used this step's code
    status, body, response = await second_step(api, challenge, code=next_code)
    assert status == 200 and body["email"] == "owner@example.com" and body["two_factor"] is True
    fresh = session_of(api, response, body)
    assert (await fresh.json("GET", "/dashboard/api-keys"))[0] == 200
    # The same code again, even with a new challenge: refused.
    _, challenge, _ = await login(api, "owner@example.com")
    status, body, _ = await second_step(api, challenge, code=next_code)
    assert status == 401 and body["name"] == "invalid_credentials"
    # A wrong password never gets as far as a challenge.
    assert (await login(api, "owner@example.com", "not the password"))[0] == 401


@pt.ensureDeferred
async def test_wrong_codes_are_refused_and_throttled(api):
    _, _, owner = await signed_in(api)
    secret, _ = await enrol(owner)
    _, challenge, _ = await login(api, "owner@example.com")
    for _ in range(5):
        status, body, _ = await second_step(api, challenge, code=wrong(secret))
        assert status == 401 and body["message"] == "The code is wrong, or was used already."
    # Throttled, even with the right code.
    status, body, response = await second_step(api, challenge, code=code(secret, 1))
    assert status == 429 and body["name"] == "rate_limit_exceeded"
    assert int(response.headers.getRawHeaders("retry-after")[0]) > 0
    # The password is no way round it: the throttle is the person's.
    _, again, _ = await login(api, "owner@example.com")
    assert (await second_step(api, again, recovery_code="aaaaa-aaaaa"))[0] == 429


@pt.ensureDeferred
async def test_a_recovery_code_works_once_and_turning_off_takes_the_password_and_a_code(api):
    _, _, owner = await signed_in(api)
    secret, codes = await enrol(owner)
    _, challenge, _ = await login(api, "owner@example.com")
    status, body, response = await second_step(api, challenge, recovery_code=codes[0].upper())
    assert status == 200, body
    assert (await second_step(api, challenge, recovery_code=codes[0]))[0] == 401
    signed = session_of(api, response, body)
    assert (await signed.json("GET", "/dashboard/two-factor"))[1]["recovery_codes_left"] == 9
    # Off: the password and a code, both right.
    status, body, _ = await signed.json("POST", "/dashboard/two-factor/disable",
                                        json={"password": "wrong", "code": code(secret, 1)})
    assert status == 422 and body["message"] == "password is wrong"
    status, body, _ = await signed.json("POST", "/dashboard/two-factor/disable",
                                        json={"password": PASSWORD, "code": wrong(secret)})
    assert status == 422
    status, body, _ = await signed.json("POST", "/dashboard/two-factor/disable",
                                        json={"password": PASSWORD, "recovery_code": codes[1]})
    assert status == 200 and body["enabled"] is False
    status, body, _ = await login(api, "owner@example.com")
    assert status == 200 and body["object"] == "user" and body["two_factor"] is False
    row = await api.parts.db.fetchone("SELECT totp_secret, recovery_codes FROM users")
    assert row == {"totp_secret": None, "recovery_codes": None}


@pt.ensureDeferred
async def test_a_set_password_link_of_someone_with_two_factor_asks_for_the_code_too(api):
    _, _, owner = await signed_in(api)
    secret, _ = await enrol(owner)
    status, link, _ = await api.json("POST", "/admin/v1/users/password-link", api.operator_token,
                                     json={"email": "owner@example.com"})
    assert status == 200
    status, challenge, response = await api.json("POST", "/auth/password",
                                                 json={"token": link_token(link), "password": "a new long password"})
    assert status == 200 and challenge["object"] == "two_factor_challenge"
    assert response.headers.getRawHeaders("set-cookie") is None
    # The password was set (every session ended), the session waits for the code.
    assert (await owner.json("GET", "/me"))[0] == 401
    assert (await second_step(api, challenge, code=code(secret, 1)))[0] == 200


@pt.ensureDeferred
async def test_an_owner_requiring_two_factor_makes_members_enrol_before_anything_else(api):
    _, _, owner = await signed_in(api)
    status, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "mia@example.com"})
    _, body, response = await api.json("POST", "/auth/password",
                                       json={"token": link_token(invited), "password": PASSWORD})
    mia = session_of(api, response, body)
    # An owner must have it first; a member may not set the rule.
    status, body, _ = await owner.json("PATCH", "/dashboard/security", json={"require_two_factor": True})
    assert status == 403 and body["code"] == "two_factor_required", body
    await enrol(owner)
    assert (await mia.json("PATCH", "/dashboard/security", json={"require_two_factor": True}))[0] == 403
    status, body, _ = await owner.json("PATCH", "/dashboard/security", json={"require_two_factor": True})
    assert status == 200 and body["require_two_factor"] is True

    # Mia's session (and a new sign-in of hers) can only enrol until she does.
    status, body, response = await login(api, "mia@example.com")
    assert status == 200 and body["object"] == "user"
    fresh = session_of(api, response, body)
    for s in (mia, fresh):
        status, body, _ = await s.json("GET", "/dashboard/api-keys")
        assert status == 403 and body["name"] == "two_factor_enrolment_required", body
        assert (await s.json("POST", "/dashboard/api-keys", json={"name": "x"}))[0] == 403
        status, me, _ = await s.json("GET", "/me")
        assert status == 200 and me["two_factor_enrolment_required"] is True
    assert (await mia.json("GET", "/dashboard/two-factor"))[1]["required_by_account"] is True
    await enrol(mia)
    assert (await mia.json("GET", "/dashboard/api-keys"))[0] == 200
    assert (await mia.json("GET", "/me"))[1]["two_factor_enrolment_required"] is False
    # The owner's own session was never held up.
    assert (await owner.json("GET", "/dashboard/api-keys"))[0] == 200


@pt.ensureDeferred
async def test_the_session_list_revoking_one_and_signing_out_everywhere_else(api):
    _, _, first = await signed_in(api)
    _, body, response = await login(api, "owner@example.com", headers={"User-Agent": "Phone/1.0"})
    second = session_of(api, response, body)
    _, body, response = await login(api, "owner@example.com", headers={"User-Agent": "Laptop/2.0"})
    third = session_of(api, response, body)
    _, _, other = await signed_in(api, "someone@example.com")
    status, listed, _ = await third.json("GET", "/dashboard/sessions")
    assert status == 200 and len(listed["data"]) == 3
    newest = listed["data"][0]
    assert newest["current"] is True and newest["user_agent"] == "Laptop/2.0" and newest["client"]
    assert [s["current"] for s in listed["data"]] == [True, False, False]
    assert listed["data"][1]["user_agent"] == "Phone/1.0" and newest["created_at"] and newest["last_seen_at"]
    # Revoke one (only one's own).
    phone = listed["data"][1]["id"]
    assert (await other.json("DELETE", f"/dashboard/sessions/{phone}"))[0] == 404
    assert (await second.json("GET", "/me"))[0] == 200
    status, body, _ = await third.json("DELETE", f"/dashboard/sessions/{phone}")
    assert status == 200 and body["deleted"] is True
    assert (await second.json("GET", "/me"))[0] == 401
    assert (await third.json("DELETE", f"/dashboard/sessions/{phone}"))[0] == 404
    assert (await third.json("DELETE", "/dashboard/sessions/not-an-id"))[0] == 404
    # Sign out everywhere else.
    status, body, _ = await third.json("POST", "/dashboard/sessions/sign-out-others")
    assert status == 200 and body["revoked"] == 1
    assert (await first.json("GET", "/me"))[0] == 401 and (await third.json("GET", "/me"))[0] == 200
    assert [s["current"] for s in (await third.json("GET", "/dashboard/sessions"))[1]["data"]] == [True]
    assert (await other.json("GET", "/me"))[0] == 200


@pt.ensureDeferred
async def test_a_password_change_a_removal_and_a_suspension_end_every_session(api):
    tenant, _, owner = await signed_in(api)
    _, body, response = await login(api, "owner@example.com")
    elsewhere = session_of(api, response, body)
    status, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "mia@example.com"})
    _, body, response = await api.json("POST", "/auth/password",
                                       json={"token": link_token(invited), "password": PASSWORD})
    mia = session_of(api, response, body)
    _, body, response = await login(api, "mia@example.com")
    mia_too = session_of(api, response, body)
    # A password change: every other session of the user ends, the one handed back lives.
    status, changed, response = await owner.json("POST", "/dashboard/password",
                                                 json={"current_password": PASSWORD, "password": "another long one"})
    assert status == 200
    assert (await elsewhere.json("GET", "/me"))[0] == 401 and (await owner.json("GET", "/me"))[0] == 401
    owner = session_of(api, response, changed)
    assert (await owner.json("GET", "/me"))[0] == 200 and (await mia.json("GET", "/me"))[0] == 200
    # A removal: all of the user's sessions.
    assert (await owner.json("DELETE", f"/dashboard/users/{invited['id']}"))[0] == 200
    assert (await mia.json("GET", "/me"))[0] == 401 and (await mia_too.json("GET", "/me"))[0] == 401
    # A suspension: every session of the account.
    _, _, someone_else = await signed_in(api, "other@example.com")
    status, _, _ = await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                                  json={"status": "suspended"})
    assert status == 200
    assert (await owner.json("GET", "/me"))[0] == 401
    assert (await someone_else.json("GET", "/me"))[0] == 200
    revoked = await api.parts.db.fetchone(
        "SELECT count(*) AS n FROM sessions WHERE tenant_id = %s AND revoked_at IS NULL", (tenant["id"],))
    assert revoked["n"] == 0


@pt.ensureDeferred
async def test_an_operator_enrols_and_signs_in_to_the_console_with_a_code(api):
    operator = await console_signed_in(api)
    status, state, _ = await operator.json("GET", "/console/two-factor")
    assert status == 200 and state["enabled"] is False
    secret, codes = await enrol(operator, "/console")
    status, challenge, response = await console_login(api, "ops@example.com", OPERATOR_PASSWORD)
    assert status == 200 and challenge["object"] == "two_factor_challenge"
    assert response.headers.getRawHeaders("set-cookie") is None
    # A dashboard challenge route does not complete a console one.
    assert (await second_step(api, challenge, code=code(secret, 1)))[0] == 401
    status, body, _ = await api.json("POST", "/console/auth/login/two-factor",
                                     json={"challenge": challenge["challenge"], "code": wrong(secret)})
    assert status == 401
    status, body, response = await api.json("POST", "/console/auth/login/two-factor",
                                            json={"challenge": challenge["challenge"], "code": code(secret, 1)})
    assert status == 200 and body["two_factor"] is True
    signed = ConsoleSession(api, console_cookie(response)[1], body["csrf_token"])
    assert (await signed.json("GET", "/console/admin/v1/tenants"))[0] == 200
    # Replayed: refused; a recovery code: once.
    status, _, _ = await api.json("POST", "/console/auth/login/two-factor",
                                  json={"challenge": challenge["challenge"], "code": code(secret, 1)})
    assert status == 401
    for expected in (200, 401):
        status, _, _ = await api.json("POST", "/console/auth/login/two-factor",
                                      json={"challenge": challenge["challenge"], "recovery_code": codes[3]})
        assert status == expected
    status, _, _ = await signed.json("POST", "/console/two-factor/disable",
                                     json={"password": OPERATOR_PASSWORD, "recovery_code": codes[4]})
    assert status == 200
    status, body, _ = await console_login(api, "ops@example.com", OPERATOR_PASSWORD)
    assert status == 200 and body["object"] == "operator"


@pt.ensureDeferred
async def test_the_operator_turns_off_a_lost_devices_two_factor_audited(api):
    _, _, owner = await signed_in(api)
    await enrol(owner)
    operator = await console_signed_in(api)
    await enrol(operator, "/console")
    status, body, _ = await api.json("POST", "/admin/v1/users/two-factor/reset", api.operator_token,
                                     json={"email": "nobody@example.com"})
    assert status == 404
    status, body, _ = await api.json("POST", "/admin/v1/users/two-factor/reset", api.operator_token,
                                     json={"email": "Owner@example.com"})
    assert status == 200 and body == {"object": "two_factor", "email": "owner@example.com", "enabled": False}
    status, body, _ = await login(api, "owner@example.com")
    assert status == 200 and body["object"] == "user"
    # The operator API through the console too: an operator's, audited under the caller's name.
    status, body, _ = await operator.json("POST", "/console/admin/v1/operators/two-factor/reset",
                                          json={"email": "ops@example.com"})
    assert status == 200, body
    status, body, _ = await console_login(api, "ops@example.com", OPERATOR_PASSWORD)
    assert status == 200 and body["object"] == "operator"
    _, audit, _ = await api.json("GET", "/admin/v1/audit", api.operator_token)
    resets = [(e["actor"], e["action"], e["detail"]["email"]) for e in audit["data"] if "two_factor" in e["action"]]
    assert sorted(resets) == [("operator", "user.two_factor_reset", "owner@example.com"),
                              ("operator:ops@example.com", "operator.two_factor_reset", "ops@example.com")]
