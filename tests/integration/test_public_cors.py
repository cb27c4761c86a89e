"""CORS on ``/public/*`` for the configured origins only (docs/contract/main-api.md, "Public CORS")."""

import json

import pytest
import pytest_twisted as pt

from mailsvc.config import load

ALLOWED = "https://www.example.com"
OTHER = "https://evil.example"


def _two_origins():
    return load(None, environ={"MAILSVC_PUBLIC_CORS_ORIGINS": f"{ALLOWED}, https://app.example.com/"})


@pytest.fixture
def config():
    """The assembled app (the ``api`` fixture) with two configured public origins."""
    return _two_origins()


@pytest.fixture(scope="module")
def shared_config():
    """The same for ``shared_api``, which the preflights (they write nothing) share."""
    return _two_origins()


def cors_headers(response) -> dict[str, str]:
    return {name.decode().lower(): values[0].decode()
            for name, values in response.headers.getAllRawHeaders()
            if name.lower().startswith(b"access-control")}


def preflight(origin: str, method: str = "POST"):
    return {"Origin": origin, "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "content-type"}


@pt.ensureDeferred
async def test_preflight_is_answered_for_a_configured_origin(shared_api):
    for origin in (ALLOWED, "https://app.example.com"):
        response, body = await shared_api.request("OPTIONS", "/public/waitlist", headers=preflight(origin))
        assert response.code == 204 and body == b""
        assert cors_headers(response) == {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": "POST",
            "access-control-allow-headers": "Content-Type, X-Request-Id",
            "access-control-max-age": "600",
            "access-control-expose-headers": "X-Request-Id",
        }
        assert response.headers.getRawHeaders("vary") == ["Origin"]


@pt.ensureDeferred
async def test_preflight_from_another_origin_gets_no_cors_headers(shared_api):
    for headers in (preflight(OTHER), preflight(ALLOWED + ".evil.example"), {}):
        response, _ = await shared_api.request("OPTIONS", "/public/waitlist", headers=headers)
        assert response.code == 204
        assert cors_headers(response) == {}


@pt.ensureDeferred
async def test_public_responses_carry_the_origin_only_for_configured_origins(api):
    response, body = await api.request(
        "POST", "/public/waitlist", json={"email": "Ann@Example.com"}, headers={"Origin": ALLOWED},
    )
    assert response.code == 200 and json.loads(body)["email"] == "ann@example.com"
    assert cors_headers(response) == {"access-control-allow-origin": ALLOWED,
                                      "access-control-expose-headers": "X-Request-Id"}
    assert response.headers.getRawHeaders("vary") == ["Origin"]

    # An error answer is readable by the configured origin's page too.
    response, body = await api.request(
        "POST", "/public/waitlist", json={"email": "not an address"}, headers={"Origin": ALLOWED},
    )
    assert response.code == 422 and json.loads(body)["name"] == "validation_error"
    assert cors_headers(response)["access-control-allow-origin"] == ALLOWED

    for headers in ({"Origin": OTHER}, {}):
        response, _ = await api.request("POST", "/public/waitlist", json={"email": "b@example.com"},
                                        headers=headers)
        assert response.code == 200
        assert cors_headers(response) == {}


@pt.ensureDeferred
async def test_the_main_api_and_unknown_public_paths_answer_no_cors(api):
    _, key = await api.tenant()
    response, _ = await api.request("OPTIONS", "/api-keys", headers=preflight(ALLOWED, "GET"))
    assert response.code in (404, 405) and cors_headers(response) == {}
    response, _ = await api.request("GET", "/api-keys", key, headers={"Origin": ALLOWED})
    assert response.code == 200 and cors_headers(response) == {}
    response, _ = await api.request("GET", "/healthz", headers={"Origin": ALLOWED})
    assert response.code == 200 and cors_headers(response) == {}
    code, body, response = await api.json("OPTIONS", "/public/nothing-here", headers=preflight(ALLOWED))
    assert code == 404 and body["name"] == "not_found" and cors_headers(response) == {}
