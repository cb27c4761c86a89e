"""The OpenAPI document: generated from the route table, served at /openapi.json, complete."""

import json

import pytest
import pytest_twisted

from mailsvc.http import openapi
from mailsvc.http.router import FULL, Mounted


@pytest_twisted.ensureDeferred
async def test_the_document_names_every_route_the_router_serves(api):
    code, doc, response = await api.json("GET", "/openapi.json")
    assert code == 200
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    served = {(m.method.lower(), openapi._openapi_path(m.path)[0]) for m in api.parts.router.mounted}
    documented = {(method, path) for path, item in doc["paths"].items() for method in item}
    assert served == documented
    # Every surface is there: main, native, operator and the public pages.
    for method, path in [("post", "/emails"), ("post", "/v1/emails"), ("get", "/v1/usage"),
                         ("post", "/admin/v1/tenants"), ("get", "/admin/v1/tenants/{tenant_id}/usage"),
                         ("get", "/public/unsubscribe/{token}"), ("get", "/metrics")]:
        assert method in doc["paths"][path], (method, path)
    assert doc["paths"]["/emails"]["post"]["security"] == [{"bearer": []}]
    assert doc["paths"]["/admin/v1/tenants"]["post"]["security"] == [{"admin": []}]
    assert set(doc["components"]["securitySchemes"]) == {"bearer", "admin", "sessionCookie", "csrfToken"}
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
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_a_route_without_an_entry_fails_loudly():
    mounted = [Mounted("GET", "/api-keys", FULL, "main"), Mounted("POST", "/gadgets/<gadget_id>/polish", FULL,
                                                                  "main")]
    with pytest.raises(openapi.Undocumented, match=r"POST /gadgets/<gadget_id>/polish"):
        openapi.document(mounted)


def test_the_document_is_valid_openapi_3_1(api):
    # Every schema is valid JSON Schema 2020-12 (OpenAPI 3.1's dialect); jsonschema_rs comes
    # with schemathesis.
    import jsonschema_rs

    doc = openapi.document(api.parts.router.mounted)
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
async def test_the_operator_api_tells_of_the_node(api):
    code, node, _ = await api.json("GET", "/admin/v1", api.operator_token)
    assert code == 200
    assert node["object"] == "node" and node["version"] and node["onion"] is None
