"""The HTTP contract every endpoint shares: envelopes, request ids, bodies, limits, paging."""

import json

import pytest_twisted as pt
from twisted.internet import defer

from mailsvc.http.site import MIB

MAIN_ERROR_KEYS = {"statusCode", "name", "message"}


@pt.ensureDeferred
async def test_unknown_route_main_and_native_envelopes(shared_api):
    code, body, response = await shared_api.json("GET", "/nothing-here")
    assert code == 404
    assert body == {"statusCode": 404, "name": "not_found",
                    "message": "The requested endpoint does not exist."}
    assert response.headers.getRawHeaders("content-type") == ["application/json"]

    code, body, response = await shared_api.json("GET", "/v1/nothing-here")
    assert code == 404
    assert set(body) == {"error"}
    assert body["error"]["code"] == "not_found"
    assert body["error"]["request_id"] == response.headers.getRawHeaders("x-request-id")[0]


@pt.ensureDeferred
async def test_wrong_method(api):
    _, key = await api.tenant()
    code, body, _ = await api.json("PUT", "/api-keys", key)
    assert code == 405
    assert set(body) == MAIN_ERROR_KEYS
    assert body["name"] == "method_not_allowed"


@pt.ensureDeferred
async def test_request_id_is_generated_or_taken_from_the_client(shared_api):
    response, _ = await shared_api.request("GET", "/healthz")
    generated = response.headers.getRawHeaders("x-request-id")
    assert generated and generated[0].startswith("req_")

    response, _ = await shared_api.request("GET", "/healthz", headers={"X-Request-Id": "client-abc-123"})
    assert response.headers.getRawHeaders("x-request-id") == ["client-abc-123"]

    too_long = "x" * 65
    response, _ = await shared_api.request("GET", "/nowhere", headers={"X-Request-Id": too_long})
    assert response.headers.getRawHeaders("x-request-id")[0] != too_long


@pt.ensureDeferred
async def test_malformed_json_is_422(api):
    _, key = await api.tenant()
    code, body, _ = await api.json(
        "POST", "/api-keys", key, data=b'{"name": ', headers={"Content-Type": "application/json"}
    )
    assert code == 422
    assert body["name"] == "validation_error"
    code, body, _ = await api.json("POST", "/api-keys", key, data=b"[1, 2]")
    assert code == 422
    assert body["name"] == "validation_error"


@pt.ensureDeferred
async def test_what_the_sdks_send_is_accepted(api):
    _, key = await api.tenant()
    # Python SDK: a JSON body on GET and DELETE.
    code, body, response = await api.json("GET", "/api-keys", key, json={})
    assert code == 200
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    # Node SDK: POST with a JSON content type and no body at all (validation, not a parse error).
    code, body, _ = await api.json(
        "POST", "/api-keys", key, data=b"", headers={"Content-Type": "application/json"}
    )
    assert code == 422
    assert body["message"].startswith("name")
    # Unknown keys are ignored.
    code, body, _ = await api.json("POST", "/api-keys", key, json={"name": "x", "unknown": [1]})
    assert code == 200


@pt.ensureDeferred
async def test_body_limit_is_enforced_before_buffering(api):
    _, key = await api.tenant()
    big = json.dumps({"name": "a" * (MIB + 10)}).encode()
    code, body, _ = await api.json("POST", "/api-keys", key, data=big)
    assert code == 422
    assert body == {"statusCode": 422, "name": "validation_error", "message": "request body too large"}
    # The key was not created.
    _, listed, _ = await api.json("GET", "/api-keys", key)
    assert len(listed["data"]) == 1


@pt.ensureDeferred
async def test_body_limits_by_route(shared_api):
    # docs/contract/main-api.md, "Limits": the route's own body size, on its /v1 and /dashboard copies too.
    limit = shared_api.parts.router.body_limit
    some_id = b"0190f5a4-0000-7000-8000-000000000000"
    for method, path, expected in [
        (b"POST", b"/emails", 50 * MIB), (b"POST", b"/emails/batch?x=1", 50 * MIB),
        (b"POST", b"/v1/emails", 50 * MIB), (b"POST", b"/dashboard/emails/batch", 50 * MIB),
        (b"PATCH", b"/emails/" + some_id, MIB), (b"POST", b"/v1/emails/" + some_id + b"/cancel", MIB),
        (b"POST", b"/emails/check", MIB),
        (b"POST", b"/templates", 5 * MIB), (b"PATCH", b"/v1/templates/welcome", 5 * MIB),
        (b"POST", b"/dashboard/templates/welcome/preview", 5 * MIB), (b"DELETE", b"/templates/welcome", MIB),
        (b"POST", b"/broadcasts", 5 * MIB), (b"PATCH", b"/v1/broadcasts/" + some_id, 5 * MIB),
        (b"POST", b"/template-builder/render", 5 * MIB), (b"POST", b"/dashboard/previews", 5 * MIB),
        (b"POST", b"/api-keys", MIB), (b"PATCH", b"/api-keys/" + some_id, MIB), (b"POST", b"/contacts/batch", MIB),
        (b"POST", b"/admin/v1/tenants", MIB), (b"POST", b"/auth/login", MIB), (b"POST", b"/emailsx", MIB),
    ]:
        assert limit(method, path) == expected, (method, path)


@pt.ensureDeferred
async def test_chunked_body_over_the_limit(api):
    _, key = await api.tenant()

    def chunks():
        yield b'{"name": "'
        for _ in range(11):
            yield b"a" * (100 * 1024)
        yield b'"}'

    import io

    from twisted.web.client import FileBodyProducer
    from twisted.web.iweb import UNKNOWN_LENGTH

    producer = FileBodyProducer(io.BytesIO(b"".join(chunks())))
    producer.length = UNKNOWN_LENGTH  # sent chunked: the limit is counted as it streams
    code, body, _ = await api.json("POST", "/api-keys", key, data=producer)
    assert code == 422
    assert body["message"] == "request body too large"


@pt.ensureDeferred
async def test_no_cors_on_the_main_api(api):
    _, key = await api.tenant()
    response, _ = await api.request(
        "OPTIONS", "/api-keys", headers={"Origin": "https://evil.example",
                                         "Access-Control-Request-Method": "GET"},
    )
    assert response.code in (404, 405)
    response, _ = await api.request("GET", "/api-keys", key, headers={"Origin": "https://x.example"})
    assert response.code == 200
    assert not [name for name, _ in response.headers.getAllRawHeaders()
                if name.lower().startswith(b"access-control")]


@pt.ensureDeferred
async def test_pagination_rules(api):
    _, key = await api.tenant()
    ids = []
    for i in range(5):
        _, created, _ = await api.json("POST", "/api-keys", key, json={"name": f"k{i}"})
        ids.append(created["id"])
    # Newest first; the tenant's first key is the oldest.
    code, page, _ = await api.json("GET", "/api-keys?limit=2", key)
    assert code == 200
    assert [k["id"] for k in page["data"]] == [ids[4], ids[3]]
    assert page["has_more"] is True and page["object"] == "list"

    _, page2, _ = await api.json("GET", f"/api-keys?limit=2&after={ids[3]}", key)
    assert [k["id"] for k in page2["data"]] == [ids[2], ids[1]]
    assert page2["has_more"] is True

    _, back, _ = await api.json("GET", f"/api-keys?limit=2&before={ids[2]}", key)
    assert [k["id"] for k in back["data"]] == [ids[4], ids[3]]
    assert back["has_more"] is False

    _, last, _ = await api.json("GET", f"/api-keys?limit=100&after={ids[0]}", key)
    assert len(last["data"]) == 1 and last["has_more"] is False

    _, everything, _ = await api.json("GET", "/api-keys", key)
    assert len(everything["data"]) == 6 and everything["has_more"] is False

    for query in ("limit=0", "limit=101", "limit=ten", f"after={ids[0]}&before={ids[1]}",
                  "after=not-an-id", "before=123"):
        code, body, _ = await api.json("GET", f"/api-keys?{query}", key)
        assert code == 422, query
        assert body["name"] == "validation_error"
    _, body, _ = await api.json("GET", "/api-keys?limit=0", key)
    assert body["message"].startswith("The pagination limit must be a number between 1 and 100")


@pt.ensureDeferred
async def test_unexpected_error_is_500_without_traceback(api):
    from mailsvc.http.router import PUBLIC, route

    class Boom:
        @route("GET", "/boom", access=PUBLIC)
        async def boom(self, request, caller):
            raise RuntimeError("secret internals")

    api.parts.router.mount(Boom())

    code, body, response = await api.json("GET", "/boom")
    assert code == 500
    assert body["name"] == "application_error"
    assert "secret" not in json.dumps(body) and "Traceback" not in json.dumps(body)
    assert response.headers.getRawHeaders("x-request-id")


#: What no stored text may hold, one per probe in turn: NUL, a lone surrogate, ESC, DEL, a C1 control.
UNSTORABLE = ("Z\u0000Ä", "a\ud800b", "a\x1bb", "a\x7fb", "a\x85b")
LINE_BREAK = "a\r\nb"


def _strings(schema: dict, steps: tuple = ()):
    """The steps (a key, or 0 for an array's item) to every string a body schema names."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "string" in kinds or any(alternative.get("type") == "string" for alternative in schema.get("oneOf", ())):
        yield steps
    if "object" in kinds:
        fields = schema.get("properties")
        if fields:
            for name, field in fields.items():
                yield from _strings(field, (*steps, name))
        else:  # a map (headers, properties, variables, a document): any key
            yield (*steps, "k")
    if "array" in kinds and "items" in schema:
        yield from _strings(schema["items"], (*steps, 0))


def _body(steps: tuple, value):
    for step in reversed(steps):
        value = [value] if step == 0 else {step: value}
    return value


def _where(steps: tuple, item: str = "[0]") -> str:
    return "".join(item if step == 0 else f".{step}" for step in steps).lstrip(".")


@pt.ensureDeferred
async def test_every_string_of_every_write_goes_through_the_one_check(api):
    # Every write route the router serves (main, /v1, /dashboard, operator, public), every string
    # its documented body names: what no text may hold is refused (422, naming the field), and so
    # is a line break outside the route's multi-line fields.
    import re
    import uuid

    from mailsvc.domain.text import MultiLine
    from mailsvc.http import openapi
    from mailsvc.http.router import FULL, OPERATOR, OPERATOR_SESSION, SENDING, SESSION
    from tests.helpers.console import console_signed_in
    from tests.helpers.dashboard import signed_in

    tenant, key, session = await signed_in(api)
    console = await console_signed_in(api)
    _, audience, _ = await api.json("POST", "/audiences", key, json={"name": "Readers"})
    known = {"audience_id": audience["id"], "tenant_id": tenant["id"], "pattern": "example.org"}
    doc = openapi.document(api.parts.router.mounted)
    probes = []
    for mounted in api.parts.router.mounted:
        if mounted.method not in ("POST", "PATCH", "PUT"):
            continue
        oas_path, _ = openapi.openapi_path(mounted.path)
        schema = doc["paths"][oas_path][mounted.method.lower()].get("requestBody")
        if schema is None:
            continue  # reads no body
        schema = schema["content"]["application/json"]["schema"]
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: known.get(m.group(1), str(uuid.uuid4())), mounted.path)
        multi_line = MultiLine(mounted.multi_line)
        headers = {"Content-Type": "application/json"}
        if mounted.access == SESSION:
            headers |= {"Cookie": f"mailsvc_session={session.token}", "X-CSRF-Token": session.csrf}
        if mounted.access == OPERATOR_SESSION:
            headers |= {"Cookie": f"mailsvc_operator={console.token}", "X-CSRF-Token": console.csrf}
        credential = {FULL: key, SENDING: key, OPERATOR: api.operator_token}.get(mounted.access)
        for index, steps in enumerate(_strings(schema)):
            shape = _where(steps, "[]")
            for value in [UNSTORABLE[index % len(UNSTORABLE)]] + ([] if shape in multi_line else [LINE_BREAK]):
                probes.append((mounted.method, path, credential, headers, steps, value))

    async def probe(method, path, credential, headers, steps, value):
        code, body, _ = await api.json(method, path, credential, headers=headers,
                                       data=json.dumps(_body(steps, value)).encode())
        where = _where(steps)
        if "error" in body:
            told, expected = (body["error"]["code"], body["error"]["field"]), ("validation_error", where)
        else:
            told, expected = (body.get("name"), body.get("message", "").startswith(where)), ("validation_error", True)
        if code != 422 or told != expected:
            return (method, path, where, repr(value), code, body)

    gate = defer.DeferredSemaphore(8)
    answers = await defer.gatherResults([gate.run(lambda p=p: defer.ensureDeferred(probe(*p))) for p in probes])
    refused_wrongly = [answer for answer in answers if answer is not None]
    assert not refused_wrongly, "\n".join(map(str, refused_wrongly))
    assert len(probes) > 300
