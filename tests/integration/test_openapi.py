"""The OpenAPI document: generated from the route table, served at /openapi.json, complete."""

import json
from pathlib import Path

import pytest
import pytest_twisted

from mailsvc.http import openapi
from mailsvc.http.operation import Operation
from mailsvc.http.router import FULL, Mounted
from tests.helpers.openapi import reply_schema
from tests.helpers.sending import sending_tenant


@pytest_twisted.ensureDeferred
async def test_the_document_names_every_route_the_router_serves(shared_api):
    code, doc, response = await shared_api.json("GET", "/openapi.json")
    assert code == 200
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    served = {(m.method.lower(), openapi.openapi_path(m.path)[0]) for m in shared_api.parts.router.mounted}
    documented = {(method, path) for path, item in doc["paths"].items() for method in item}
    assert served == documented
    # Every surface is there: main, native, operator and the public pages.
    for method, path in [("post", "/emails"), ("post", "/v1/emails"), ("get", "/v1/usage"),
                         ("post", "/admin/v1/tenants"), ("get", "/admin/v1/tenants/{tenant_id}/usage"),
                         ("get", "/public/unsubscribe/{token}"), ("get", "/metrics")]:
        assert method in doc["paths"][path], (method, path)
    assert doc["paths"]["/emails"]["post"]["security"] == [{"bearer": []}]
    assert doc["paths"]["/admin/v1/tenants"]["post"]["security"] == [{"admin": []}]
    assert set(doc["components"]["securitySchemes"]) == {"bearer", "admin", "sessionCookie", "consoleCookie",
                                                        "csrfToken"}
    # The dashboard: its own routes, and the /dashboard copy of every API-key route, which shares
    # the route's entry (body, replies) with the session cookie (and CSRF token) as security.
    for method, path in [("post", "/auth/login"), ("get", "/me"), ("get", "/dashboard/users"),
                         ("get", "/dashboard/stats"), ("post", "/template-builder/ai/generate"),
                         ("post", "/brand/import"), ("get", "/files/brand/{name}"), ("get", "/ui/{name}"),
                         ("get", "/"), ("get", "/dashboard/usage")]:
        assert method in doc["paths"][path], (method, path)
    copy, original = doc["paths"]["/dashboard/emails"]["post"], doc["paths"]["/emails"]["post"]
    assert copy["tags"] == ["dashboard"] and original["tags"] == ["main"]
    assert copy["security"] == [{"sessionCookie": [], "csrfToken": []}]
    assert doc["paths"]["/dashboard/emails"]["get"]["security"] == [{"sessionCookie": []}]
    assert copy["requestBody"] == original["requestBody"]
    assert copy["responses"]["200"]["content"] == original["responses"]["200"]["content"]
    assert "/emails" in copy["description"]
    assert doc["paths"]["/auth/login"]["post"]["security"] == []
    assert doc["paths"]["/dashboard/usage"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] \
        == {"$ref": "#/components/schemas/Usage"}
    assert "/dashboard/v1/usage" not in doc["paths"]
    # Errors point at the envelope of the route's surface.
    main_error = doc["paths"]["/emails"]["post"]["responses"]["422"]["content"]["application/json"]["schema"]
    native_error = doc["paths"]["/v1/emails"]["post"]["responses"]["422"]["content"]["application/json"]["schema"]
    assert main_error == {"$ref": "#/components/schemas/MainError"}
    assert native_error == {"$ref": "#/components/schemas/NativeError"}
    # Native replies that differ from the main route's are the native ones.
    assert set(doc["paths"]["/v1/api-keys/{key_id}"]["delete"]["responses"]) >= {"204"}
    assert "200" not in doc["paths"]["/v1/api-keys/{key_id}"]["delete"]["responses"]
    # The native batch is atomic: it reads no x-batch-validation (docs/contract/native-api.md).
    def headers(path):
        return {p["name"] for p in doc["paths"][path]["post"]["parameters"] if p["in"] == "header"}
    assert headers("/emails/batch") == {"Idempotency-Key", "x-batch-validation"}
    assert headers("/v1/emails/batch") == {"Idempotency-Key"}
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


#: The served document as the suite's node serves it: a change to it shows here, in review, as a
#: change of the published interface. When one is meant, write the served ``GET /openapi.json``
#: there again as ``json.dumps(doc, indent=1, sort_keys=True)`` (key order is not compared).
SNAPSHOT = Path(__file__).parent.parent / "samples" / "openapi.json"


@pytest_twisted.ensureDeferred
async def test_the_served_document_is_the_one_published(shared_api):
    code, doc, _ = await shared_api.json("GET", "/openapi.json")
    assert code == 200
    published = json.loads(SNAPSHOT.read_text())
    changed = sorted(path for path in {*doc["paths"], *published["paths"]}
                     if doc["paths"].get(path) != published["paths"].get(path))
    assert not changed, f"paths that differ from {SNAPSHOT.name}: {changed}"
    assert doc == published


def test_a_route_without_an_operation_fails_loudly():
    listed = Operation("List API keys")
    mounted = [Mounted("GET", "/api-keys", FULL, "main", op=listed),
               Mounted("POST", "/gadgets/<gadget_id>/polish", FULL, "main")]
    with pytest.raises(openapi.Undocumented, match=r"POST /gadgets/<gadget_id>/polish"):
        openapi.document(mounted)


def test_the_document_is_valid_openapi_3_1(shared_api):
    # Every schema is valid JSON Schema 2020-12 (OpenAPI 3.1's dialect); jsonschema_rs comes
    # with schemathesis.
    import jsonschema_rs

    doc = openapi.document(shared_api.parts.router.mounted)
    json.dumps(doc)
    for item in doc["paths"].values():
        for op in item.values():
            for response in op["responses"].values():
                for media in response.get("content", {}).values():
                    if "schema" in media and "$ref" not in media["schema"]:
                        jsonschema_rs.meta.validate(media["schema"])
    for schema in doc["components"]["schemas"].values():
        jsonschema_rs.meta.validate(schema)


@pytest_twisted.ensureDeferred
async def test_usage_counts_todays_and_this_months_sends_against_the_quotas(api, db):
    tenant, key = await api.tenant()
    code, _, _ = await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                                json={"daily_quota": 100, "monthly_quota": 3000})
    assert code == 200
    code, usage, _ = await api.json("GET", "/v1/usage", key)
    assert code == 200, usage
    assert usage["object"] == "usage"
    assert usage["day"]["quota"] == 100 and usage["month"]["quota"] == 3000
    assert usage["day"]["emails"] == usage["day"]["recipients"] == 0
    assert usage["ai"] == {"used": 0, "quota": 0}
    # Two e-mails to three recipients, as the accept statement charges them.
    await db.execute("INSERT INTO usage (tenant_id, period, count) VALUES (%s, %s, 3), (%s, %s, 3)",
                      (tenant["id"], f"day:{usage['day']['start'][:10]}", tenant["id"],
                       f"month:{usage['month']['start'][:7]}"))
    code, usage, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}/usage", api.operator_token)
    assert code == 200, usage
    assert usage["day"]["recipients"] == 3 and usage["day"]["remaining"] == 97
    assert usage["month"]["recipients"] == 3 and usage["month"]["remaining"] == 2997
    # The main surface has no /usage; the native one wants a key.
    code, body, _ = await api.json("GET", "/v1/usage")
    assert code == 401 and body["error"]["code"] == "missing_api_key"
    code, body, _ = await api.json("GET", "/admin/v1/tenants/nope/usage", api.operator_token)
    assert code == 404 and "error" in body


@pytest_twisted.ensureDeferred
async def test_the_operator_api_tells_of_the_node(shared_api):
    code, node, _ = await shared_api.json("GET", "/admin/v1", shared_api.operator_token)
    assert code == 200
    assert node["object"] == "node" and node["version"] and node["onion"] is None


@pytest_twisted.ensureDeferred
async def test_the_replies_of_broadcasts_and_shaping_match_their_entries(api):
    # schemathesis cannot reach these successes (a broadcast needs a segment of the account):
    # each reply, main and native, is checked against the schema the document gives it.
    import jsonschema_rs

    def check(op_key, reply, status=200, native=False):
        method, path = op_key.split(" ", 1)
        jsonschema_rs.validate(reply_schema(api, method, ("/v1" if native else "") + path, status), reply)

    _, key, _ = await sending_tenant(api, "example.com")  # a broadcast is sent from a verified domain
    code, segment, _ = await api.json("POST", "/segments", key, json={"name": "Readers"})
    assert code == 201, segment
    code, contact, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.net", "first_name": "Ann",
                                                                     "segments": [{"id": segment["id"]}]})
    assert code == 201, contact
    body = {"segment_id": segment["id"], "from": "News <news@example.com>", "subject": "Hi {{{FIRST_NAME|you}}}",
            "html": "<p>Hi {{{FIRST_NAME|there}}}</p>", "reply_to": "help@example.com", "name": "Launch"}
    for prefix, native in (("", False), ("/v1", True)):
        code, created, _ = await api.json("POST", f"{prefix}/broadcasts", key, json=body)
        assert code == 200, created
        check("POST /broadcasts", created, native=native)
        path = f"{prefix}/broadcasts/{created['id']}"
        code, got, _ = await api.json("GET", path, key)
        assert code == 200 and got["status"] == "draft"
        check("GET /broadcasts/<broadcast_id>", got)
        code, listed, _ = await api.json("GET", f"{prefix}/broadcasts", key)
        assert code == 200 and listed["data"]
        check("GET /broadcasts", listed)
        code, patched, _ = await api.json("PATCH", path, key, json={"preview_text": "Soon", "text": "Hi"})
        assert code == 200, patched
        check("PATCH /broadcasts/<broadcast_id>", patched, native=native)
        code, preview, _ = await api.json("POST", f"{path}/preview", key, json={})
        assert code == 200 and preview["contact_id"] is not None, preview
        check("POST /broadcasts/<broadcast_id>/preview", preview)
        code, copy, _ = await api.json("POST", f"{path}/duplicate", key)
        assert code == 200, copy
        check("POST /broadcasts/<broadcast_id>/duplicate", copy, native=native)
        code, sent, _ = await api.json("POST", f"{path}/send", key, json={"scheduled_at": "in 1 hour"})
        assert code == 200, sent
        check("POST /broadcasts/<broadcast_id>/send", sent, native=native)
        code, canceled, _ = await api.json("POST", f"{path}/cancel", key)
        assert code == 200, canceled
        check("POST /broadcasts/<broadcast_id>/cancel", canceled, native=native)
        response, raw = await api.request("DELETE", path, key)
        if native:
            assert response.code == 204 and not raw
        else:
            assert response.code == 200
            check("DELETE /broadcasts/<broadcast_id>", json.loads(raw))
    # The node, and adaptive shaping's starting limits.
    code, node, _ = await api.json("GET", "/admin/v1", api.operator_token)
    check("GET /admin/v1", node)
    code, limit, _ = await api.json("PUT", "/admin/v1/destinations/defaults/example.org", api.operator_token,
                                    json={"concurrency": 4, "rate_per_sec": 2.5})
    assert code == 200, limit
    check("PUT /admin/v1/destinations/defaults/<pattern>", limit)
    code, listed, _ = await api.json("GET", "/admin/v1/destinations", api.operator_token)
    assert code == 200 and listed["defaults"], listed
    check("GET /admin/v1/destinations", listed)
    code, gone, _ = await api.json("DELETE", "/admin/v1/destinations/defaults/example.org", api.operator_token)
    assert code == 200, gone
    check("DELETE /admin/v1/destinations/defaults/<pattern>", gone)


def _resolved(schema: dict, doc: dict) -> dict:
    """``schema`` with the document's components beside it, so that its ``$ref``s resolve."""
    return {**schema, "components": doc["components"]}


@pytest_twisted.ensureDeferred
async def test_every_route_answers_what_the_document_says(api):
    # Each route the router serves is called (GETs first, then writes with an empty body, deletes,
    # signing out last), as an API key, a dashboard session or the operator as its access says,
    # on resources of the account where the path names one: it answers a status the document
    # lists for it, with a body of the schema listed for that status; and a read of resources
    # that exist answers one of its documented successes, or an error when the document lists
    # none (an unavailable route, such as a contact's topics).
    import re
    import uuid

    import jsonschema_rs
    from twisted.internet import defer

    from mailsvc.http.router import OPERATOR, OPERATOR_SESSION, SENDING, SESSION, SESSION_FRAME
    from tests.helpers.console import console_signed_in
    from tests.helpers.dashboard import signed_in

    tenant, key, session = await signed_in(api)
    console = await console_signed_in(api)

    async def created(path, body):
        code, reply, _ = await api.json("POST", path, key, json=body)
        assert code in (200, 201), (path, reply)
        return reply["id"]

    segment = await created("/segments", {"name": "Readers"})
    contact = "ann@example.com"
    await created("/contacts", {"email": contact, "segments": [{"id": segment}]})
    existing = {
        "segment_id": segment, "audience_id": await created("/audiences", {"name": "Old"}),
        "tenant_id": tenant["id"], "user_id": session.user["id"],
        "broadcast_id": await created("/broadcasts", {"segment_id": segment, "from": "News <news@example.com>",
                                                      "subject": "Hi", "html": "<p>Hi</p>"}),
        ("templates", "key"): await created("/templates", {"name": "Welcome", "html": "<p>Hi</p>"}),
        ("contacts", "key"): contact,
        ("suppressions", "key"): "gone@example.com",
    }
    await created("/suppressions", {"email": "gone@example.com"})

    def filled(path: str) -> tuple[str, bool]:
        """The path with the account's resources where it names them (else unknown ids); all of them known?"""
        known = True

        def value(match: re.Match) -> str:
            nonlocal known
            before = path[:match.start()].rstrip("/").rsplit("/", 1)[-1]
            found = existing.get(match.group(1)) or existing.get((before, match.group(1)))
            known = known and found is not None
            return found or str(uuid.uuid4())

        return re.sub(r"<(?:\w+:)?(\w+)>", value, path), known

    doc = openapi.document(api.parts.router.mounted)

    async def call(mounted):
        path, known = filled(mounted.path)
        headers = {}
        if mounted.access in (SESSION, SESSION_FRAME):
            headers = {"Cookie": f"mailsvc_session={session.token}", "X-CSRF-Token": session.csrf}
        if mounted.access == OPERATOR_SESSION:
            headers = {"Cookie": f"mailsvc_operator={console.token}", "X-CSRF-Token": console.csrf}
        credential = {FULL: key, SENDING: key, OPERATOR: api.operator_token}.get(mounted.access)
        body = {} if mounted.method in ("POST", "PATCH", "PUT") else None
        response, raw = await api.request(mounted.method, path, credential, headers=headers, json=body,
                                          allow_redirects=False)
        operation = doc["paths"][openapi.openapi_path(mounted.path)[0]][mounted.method.lower()]
        documented = operation["responses"]
        where = f"{mounted.method} {path}"
        if str(response.code) not in documented:
            return f"{where}: {response.code} is not documented ({sorted(documented)}): {raw[:300]!r}"
        media = documented[str(response.code)].get("content", {}).get("application/json")
        if media and "schema" in media:
            try:
                jsonschema_rs.validate(_resolved(media["schema"], doc), json.loads(raw))
            except (ValueError, jsonschema_rs.ValidationError) as e:
                return f"{where}: the {response.code} reply is not of its documented schema: {e}"
        successes = [status for status in documented if status.startswith(("2", "3"))]
        if mounted.method == "GET" and known and mounted.access != SESSION_FRAME:
            if successes and str(response.code) not in successes:
                return f"{where}: answered {response.code} where the document promises {successes}: {raw[:300]!r}"
            if not successes and response.code < 400:
                return f"{where}: answered {response.code}, the document lists no success"
        return None

    sign_outs = ("/auth/logout", "/console/auth/logout")
    phases = [
        [m for m in api.parts.router.mounted if m.method == "GET"],
        [m for m in api.parts.router.mounted if m.method in ("POST", "PATCH", "PUT") and m.path not in sign_outs],
        [m for m in api.parts.router.mounted if m.method == "DELETE"],
        [m for m in api.parts.router.mounted if m.path in sign_outs],
    ]
    assert sum(map(len, phases)) == len(api.parts.router.mounted)
    gate = defer.DeferredSemaphore(8)
    wrong = []
    for phase in phases:
        answers = await defer.gatherResults([gate.run(lambda m=m: defer.ensureDeferred(call(m))) for m in phase])
        wrong += [answer for answer in answers if answer is not None]
    assert not wrong, "\n".join(wrong)
