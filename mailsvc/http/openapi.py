"""
The OpenAPI 3.1 document of every route the router serves, served at ``/openapi.json``.

The document is generated, never written beside the code: its paths, methods, surfaces,
security and error envelopes come from the router's table (``Router.mounted``, filled by
``@route``), and each route's request and success schemas from ``OPERATIONS`` below, keyed by
``"METHOD /path"`` exactly as the handler's ``@route`` spells it (without ``/v1``: a native
route shares its main route's entry, with ``native_ok`` where its replies differ).

A route mounted without an entry here makes ``document()`` raise ``Undocumented`` naming it
(and ``tests/test_openapi.py`` fail): adding a route means adding its one ``Op`` line here.
"""

from __future__ import annotations

import json
import re

import attrs

from mailsvc.http.errors import MAIN, NATIVE
from mailsvc.http.router import OPERATOR, PUBLIC, SENDING, Mounted, Reply, route

VERSION = "1.0.0"  # SPEC "Versioning": the published interface description carries 1.0.0.

# --- schema helpers ----------------------------------------------------------------------------

STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
UUID = {"type": "string", "format": "uuid"}
OBJECT = {"type": "object"}
NULLABLE_STR = {"type": ["string", "null"]}
STR_OR_LIST = {"oneOf": [STR, {"type": "array", "items": STR}]}


def obj(required: tuple[str, ...] = (), **properties) -> dict:
    """An object with these properties (others allowed: the SDKs ignore unknown keys)."""
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def listing(item: dict = OBJECT) -> dict:
    """The list envelope of every list endpoint (SPEC "Endpoints")."""
    return obj(("object", "has_more", "data"), object={"const": "list"}, has_more=BOOL,
               data={"type": "array", "items": item})


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


#: Pagination query parameters (SPEC "Limits"); the service answers 422 outside them.
PAGE = (("limit", {"type": "integer", "minimum": 1, "maximum": 100}), ("after", UUID), ("before", UUID))

SEND = obj(
    ("to",),
    **{"from": STR}, to=STR_OR_LIST, cc=STR_OR_LIST, bcc=STR_OR_LIST, reply_to=STR_OR_LIST,
    subject=STR, html=STR, text=STR, headers={"type": "object", "additionalProperties": STR},
    attachments={"type": "array", "items": obj(filename=STR, content=STR, path=STR, content_type=STR,
                                                content_id=STR)},
    tags={"type": "array", "items": obj(("name", "value"), name=STR, value=STR)},
    scheduled_at=STR, template=obj(("id",), id=STR, variables=OBJECT), topic_id=STR,
    stream={"enum": ["transactional", "broadcast"]},
)
CONTACT = obj(email=STR, first_name=NULLABLE_STR, last_name=NULLABLE_STR, unsubscribed=BOOL,
              properties=OBJECT, segments={"type": "array", "items": obj(id=STR)})
TENANT_FIELDS = dict(name=STR, status=STR, status_reason=NULLABLE_STR, daily_quota=INT, monthly_quota=INT,
                     send_rate_per_sec=INT, api_rate_per_sec=INT, delivery_mode=STR,
                     max_domains={"type": ["integer", "null"]},
                     plan={"enum": ["free", "starter", "growth", "scale"]})
RESOURCE = obj(("object", "id"), object=STR, id=STR)  # the {object, id} reply of a write
ID = obj(("id",), id=STR)
DELETED = obj(("object", "id", "deleted"), object=STR, id=STR, deleted={"const": True})
USAGE = ref("Usage")
TENANT = obj(("object", "id", "name", "plan", "status"), object={"const": "tenant"}, id=UUID, **TENANT_FIELDS)


@attrs.frozen
class Op:
    """What one route takes and gives beside what the router knows (its path, access, surface)."""

    summary: str
    body: dict | None = None  # JSON request body schema; None: none read
    ok: dict = attrs.Factory(lambda: {200: OBJECT})  # status → JSON schema (None: no body)
    native_ok: dict | None = None  # the /v1 route's replies when they differ
    query: tuple[tuple[str, dict], ...] = ()
    headers: tuple[tuple[str, dict], ...] = ()
    errors: tuple[int, ...] = ()  # statuses beside those every route of its kind may answer
    content_type: str = "application/json"  # of the success replies
    also: tuple[str, ...] = ()  # other content types a success may have (an export's CSV)


OPERATIONS: dict[str, Op] = {
    # API keys
    "POST /api-keys": Op("Create an API key", obj(("name",), name=STR, permission=STR, domain_id=UUID),
                         {200: obj(("id", "token"), id=UUID, token=STR)},
                         {201: obj(("id", "token"), id=UUID, token=STR)}),
    "GET /api-keys": Op("List API keys", ok={200: listing()}, query=PAGE),
    "PATCH /api-keys/<key_id>": Op("Rename an API key", obj(("name",), name=STR), {200: RESOURCE}),
    "DELETE /api-keys/<key_id>": Op("Revoke an API key", ok={200: DELETED}, native_ok={204: None}),
    # Suppressions
    "POST /suppressions": Op("Add a suppression", obj(email=STR, reason=STR), {201: RESOURCE}),
    "GET /suppressions": Op("List suppressions", ok={200: listing()}, query=(*PAGE, ("origin", STR))),
    "GET /suppressions/<path:key>": Op("Retrieve a suppression (id or address)"),
    "DELETE /suppressions/<path:key>": Op("Remove a suppression (id or address)", ok={200: DELETED},
                                          native_ok={204: None}),
    "POST /suppressions/batch/add": Op("Add suppressions", OBJECT, {201: obj(("data",), data={"type": "array"})}),
    "POST /suppressions/batch/remove": Op("Remove suppressions", OBJECT, {200: obj(("data",), data={"type": "array"})}),
    # Contacts
    "POST /contacts": Op("Create or update a contact (by address)", CONTACT, {201: RESOURCE}),
    "POST /contacts/batch": Op(
        "Create or update up to 1,000 contacts",
        obj(("contacts",), contacts={"type": "array", "items": CONTACT}, segment_id=UUID),
        {200: obj(("data", "errors"), data={"type": "array"}, errors={"type": "array"})}),
    "GET /contacts": Op("List contacts", ok={200: listing()},
                        query=(*PAGE, ("q", STR), ("segment_id", UUID), ("audience_id", UUID))),
    "GET /contacts/<path:key>": Op("Retrieve a contact (id or address)"),
    "PATCH /contacts/<path:key>": Op("Update a contact", CONTACT, {200: RESOURCE}),
    "DELETE /contacts/<path:key>": Op("Delete a contact", ok={200: RESOURCE}, native_ok={204: None}),
    "GET /contacts/<path:key>/segments": Op("List a contact's segments", ok={200: listing()}, query=PAGE),
    "POST /contacts/<path:key>/segments/<segment_id>": Op("Add a contact to a segment", ok={200: OBJECT, 201: OBJECT}),
    "DELETE /contacts/<path:key>/segments/<segment_id>": Op("Remove a contact from a segment", ok={200: OBJECT},
                                                            native_ok={204: None}),
    "GET /contacts/<path:key>/topics": Op("List a contact's topics", ok={200: listing()}),
    "PATCH /contacts/<path:key>/topics": Op("Update a contact's topics (unsupported)", OBJECT),
    # Domains
    "POST /domains": Op("Add a sending domain", obj(("name",), name=STR, custom_return_path=STR, region=STR),
                        {201: obj(("id", "name", "status", "records"), id=UUID, name=STR, status=STR,
                                  records={"type": "array"})}),
    "GET /domains": Op("List domains", ok={200: listing()}, query=PAGE),
    "GET /domains/<domain_id>": Op("Retrieve a domain", ok={200: obj(("id", "name", "status"))}),
    "PATCH /domains/<domain_id>": Op("Update a domain", obj(tls={"enum": ["opportunistic", "enforced"]},
                                                            click_tracking=BOOL, open_tracking=BOOL), {200: RESOURCE}),
    "DELETE /domains/<domain_id>": Op("Delete a domain", ok={200: DELETED}, native_ok={204: None}),
    "POST /domains/<domain_id>/verify": Op("Check a domain's DNS now", ok={200: RESOURCE}, native_ok={202: RESOURCE}),
    "POST /domains/<domain_id>/dns-provider/cloudflare": Op(
        "Write the domain's records into a Cloudflare zone", obj(("api_token",), api_token=STR),
        {200: obj(("object", "zone", "records"), object={"const": "dns_setup"}, zone=STR,
                  records={"type": "array"})}, errors=(502,)),
    # Emails
    "POST /emails": Op("Send an e-mail", SEND, {200: ID}, headers=(("Idempotency-Key", STR),), errors=(400, 409)),
    "POST /emails/batch": Op("Send up to 100 e-mails", {"type": "array", "items": SEND},
                             {200: obj(("data",), data={"type": "array", "items": ID}, errors={"type": "array"})},
                             headers=(("Idempotency-Key", STR),
                                      ("x-batch-validation", {"enum": ["strict", "permissive"]})),
                             errors=(400, 409)),
    "GET /emails": Op("List e-mails", ok={200: listing()}, query=PAGE),
    "GET /emails/<email_id>": Op("Retrieve an e-mail", ok={200: obj(("object", "id"), object={"const": "email"},
                                                                   id=UUID)}),
    "PATCH /emails/<email_id>": Op("Reschedule an e-mail", obj(("scheduled_at",), scheduled_at=STR),
                                   {200: RESOURCE}, errors=(409,)),
    "POST /emails/<email_id>/cancel": Op("Cancel a scheduled e-mail", ok={200: RESOURCE}, errors=(409,)),
    "GET /emails/<email_id>/attachments": Op("List an e-mail's attachments", ok={200: listing()}, query=PAGE),
    "GET /emails/<email_id>/attachments/<attachment_id>": Op("Retrieve an attachment"),
    "GET /public/attachments/<token>": Op("Download an attachment through its signed link", ok={200: None},
                                          content_type="application/octet-stream", errors=(403,)),
    # Webhooks
    "POST /webhooks": Op("Create a webhook", obj(("endpoint", "events"), endpoint=STR,
                                                 events={"type": "array", "items": STR}),
                         {201: obj(("id", "signing_secret"), id=UUID, signing_secret=STR)}),
    "GET /webhooks": Op("List webhooks", ok={200: listing()}, query=PAGE),
    "GET /webhooks/<webhook_id>": Op("Retrieve a webhook", ok={200: obj(("id",), id=UUID)}),
    "PATCH /webhooks/<webhook_id>": Op("Update a webhook", obj(endpoint=STR, events={"type": "array", "items": STR},
                                                               status={"enum": ["enabled", "disabled"]}),
                                       {200: RESOURCE}),
    "DELETE /webhooks/<webhook_id>": Op("Delete a webhook", ok={200: RESOURCE}, native_ok={204: None}),
    "POST /webhooks/<webhook_id>/signing-secret/rotate": Op("Rotate a webhook's signing secret"),
    # Templates
    "POST /templates": Op("Create a template", obj(("name",), name=STR, alias=STR, html=STR, text=STR,
                                                   subject=STR, builder=OBJECT, variables={"type": "array"}),
                          {201: RESOURCE}, errors=(409,)),
    "GET /templates": Op("List templates", ok={200: listing()}, query=PAGE),
    "GET /templates/<key>": Op("Retrieve a template's draft"),
    "PATCH /templates/<key>": Op("Update a template", OBJECT, {200: RESOURCE}, errors=(409,)),
    "DELETE /templates/<key>": Op("Delete a template", ok={200: RESOURCE}, native_ok={204: None}),
    "POST /templates/<key>/publish": Op("Publish a template", ok={200: RESOURCE}),
    "POST /templates/<key>/duplicate": Op("Duplicate a template", ok={200: RESOURCE, 201: RESOURCE}, errors=(409,)),
    "POST /templates/<key>/preview": Op("Preview a template with variables", OBJECT),
    # Segments and the legacy audiences
    "POST /segments": Op("Create a segment", obj(("name",), name=STR), {201: RESOURCE}),
    "GET /segments": Op("List segments", ok={200: listing()}, query=PAGE),
    "GET /segments/<segment_id>": Op("Retrieve a segment", ok={200: RESOURCE}),
    "PATCH /segments/<segment_id>": Op("Rename a segment", obj(("name",), name=STR), {200: RESOURCE}),
    "DELETE /segments/<segment_id>": Op("Delete a segment", ok={200: RESOURCE}, native_ok={204: None}),
    "GET /segments/<segment_id>/contacts": Op("List a segment's contacts", ok={200: listing()},
                                              query=(*PAGE, ("q", STR))),
    "POST /audiences": Op("Create an audience", obj(("name",), name=STR), {201: RESOURCE}),
    "GET /audiences": Op("List audiences", ok={200: listing()}, query=PAGE),
    "GET /audiences/<audience_id>": Op("Retrieve an audience", ok={200: RESOURCE}),
    "DELETE /audiences/<audience_id>": Op("Delete an audience", ok={200: RESOURCE}),
    "GET /audiences/<audience_id>/contacts": Op("List an audience's contacts", ok={200: listing()},
                                                query=(*PAGE, ("q", STR))),
    "POST /audiences/<audience_id>/contacts": Op("Create a contact in an audience", CONTACT, {201: RESOURCE}),
    "GET /audiences/<audience_id>/contacts/<path:key>": Op("Retrieve an audience's contact"),
    "PATCH /audiences/<audience_id>/contacts/<path:key>": Op("Update an audience's contact", CONTACT, {200: RESOURCE}),
    "DELETE /audiences/<audience_id>/contacts/<path:key>": Op("Delete an audience's contact", ok={200: RESOURCE}),
    # Template builder
    "GET /template-builder": Op("What the plan allows of the builder",
                                ok={200: obj(("object", "plan", "builder"), object={"const": "template_builder"})}),
    "GET /template-builder/theme": Op("The account's theme and brand", ok={200: obj(("object", "theme", "brand"))}),
    "PATCH /template-builder/theme": Op("Save the theme and brand (top plan)", obj(("theme",), theme=OBJECT,
                                                                                  brand=OBJECT),
                                        {200: obj(("object", "theme", "brand"))}),
    "POST /template-builder/render": Op("Render a builder document", obj(("document",), document=OBJECT),
                                        {200: obj(("html", "text"), html=STR, text=STR)}),
    "GET /files/social/<name>": Op("A social icon", ok={200: None}, content_type="image/png"),
    # Usage
    "GET /usage": Op("The account's sends and recipients today and this month against its quotas",
                     ok={200: USAGE}),
    # Public pages, health, metrics, this document
    "GET /public/unsubscribe/<token>": Op("The unsubscribe page", ok={200: None}, content_type="text/html",
                                          errors=(403,)),
    "POST /public/unsubscribe/<token>": Op("Unsubscribe (RFC 8058 one-click or the page's form)", ok={200: None},
                                           content_type="text/html", errors=(403,)),
    "POST /public/waitlist": Op("Join the waitlist", obj(("email",), email=STR),
                                {200: obj(("object", "email"), object={"const": "waitlist_entry"})},
                                errors=(429,)),
    "GET /healthz": Op("Health: the database answers", ok={200: obj(("status",), status=STR)}, errors=(503,)),
    "GET /openapi.json": Op("This document", ok={200: OBJECT}),
    "GET /metrics": Op("Prometheus metrics", ok={200: None}, content_type="text/plain"),
    # Operator API
    "POST /admin/v1/tenants": Op("Create a tenant and its first API key",
                                 obj(("name",), id=UUID, **TENANT_FIELDS),
                                 {201: {**TENANT, "required": [*TENANT["required"], "api_key"]}}, errors=(409,)),
    "GET /admin/v1/tenants/<tenant_id>": Op("Retrieve a tenant", ok={200: TENANT}),
    "PATCH /admin/v1/tenants/<tenant_id>": Op("Update a tenant", obj(**TENANT_FIELDS), {200: TENANT}),
    "GET /admin/v1/tenants/<tenant_id>/usage": Op("A tenant's usage against its quotas", ok={200: USAGE}),
    "GET /admin/v1/waitlist": Op("Export the waitlist", ok={200: listing()},
                                 query=(*PAGE, ("format", {"enum": ["json", "csv"]})),
                                 also=("text/csv",)),
    "GET /admin/v1": Op("This node: version, roles, the onion address when published",
                        ok={200: obj(("object", "version"), object={"const": "node"})}),
}

# --- error envelopes ---------------------------------------------------------------------------

COMPONENTS = {
    "schemas": {
        "MainError": {
            "type": "object", "additionalProperties": False,
            "required": ["statusCode", "name", "message"],
            "properties": {"statusCode": INT, "name": STR, "message": STR},
        },
        "NativeError": {
            "type": "object", "additionalProperties": False, "required": ["error"],
            "properties": {"error": {
                "type": "object", "additionalProperties": False,
                "required": ["code", "message", "field", "request_id"],
                "properties": {"code": STR, "message": STR, "field": NULLABLE_STR, "request_id": STR},
            }},
        },
        "Usage": obj(
            ("object", "day", "month", "ai"), object={"const": "usage"},
            day=obj(("start", "emails", "recipients", "quota", "remaining"), start=STR, emails=INT,
                    recipients=INT, quota=INT, remaining=INT),
            month=obj(("start", "emails", "recipients", "quota", "remaining"), start=STR, emails=INT,
                      recipients=INT, quota=INT, remaining=INT),
            ai=obj(("used", "quota"), used=INT, quota=INT),
        ),
    },
    "securitySchemes": {
        "bearer": {"type": "http", "scheme": "bearer",
                   "description": "An API key (`re_...`): `Authorization: Bearer <API_KEY>`."},
        "admin": {"type": "http", "scheme": "bearer",
                  "description": "The operator token (`operator.token`, or `<state dir>/operator-token`)."},
    },
}

#: What an error reply may be, by status (SPEC "Errors").
_ERROR_TEXT = {
    400: "Invalid request (idempotency key, malformed HTTP)",
    401: "Missing credentials, or a key restricted to sending",
    403: "Invalid credentials, or the request is not allowed",
    404: "Not found (or the id is not a UUID)",
    409: "Conflict with the resource's state",
    422: "Validation failed (the message starts with the field)",
    429: "Rate limit or quota exceeded",
    500: "Unexpected error; retry with backoff",
    502: "An outside provider failed",
    503: "Unavailable",
}


class Undocumented(Exception):
    """Routes served with no entry in ``OPERATIONS``."""


def _openapi_path(path: str) -> tuple[str, list[str]]:
    names: list[str] = []

    def replace(match: re.Match) -> str:
        names.append(match.group(2))
        return "{" + match.group(2) + "}"

    return re.sub(r"<(?:(\w+):)?(\w+)>", replace, path), names


def _key(mounted: Mounted) -> str:
    path = mounted.path
    if mounted.surface == NATIVE and path.startswith("/v1/"):
        path = path[len("/v1"):]
    return f"{mounted.method} {path}"


def _operation(mounted: Mounted, op: Op, params: list[str]) -> dict:
    native = mounted.surface == NATIVE
    envelope = ref("NativeError" if native else "MainError")
    oas_path, _ = _openapi_path(mounted.path)
    operation: dict = {
        "operationId": (mounted.method.lower() + re.sub(r"[^A-Za-z0-9]+", "_", oas_path)).rstrip("_"),
        "summary": op.summary,
        "tags": [_surface_tag(mounted)],
    }
    parameters = [{"name": name, "in": "path", "required": True, "schema": STR} for name in params]
    parameters += [{"name": name, "in": "query", "required": False, "schema": schema} for name, schema in op.query]
    parameters += [{"name": name, "in": "header", "required": False, "schema": schema}
                   for name, schema in op.headers]
    if parameters:
        operation["parameters"] = parameters
    if op.body is not None:
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": op.body}}}
    responses: dict = {}
    ok = op.native_ok if native and op.native_ok is not None else op.ok
    for status, schema in ok.items():
        if schema is None and op.content_type == "application/json":
            responses[str(status)] = {"description": "Done; no body"}
        elif schema is None:
            responses[str(status)] = {"description": "Done", "content": {op.content_type: {}}}
        else:
            responses[str(status)] = {"description": "Done", "content": {op.content_type: {"schema": schema}}}
        for other in op.also:
            responses[str(status)].setdefault("content", {})[other] = {}
    statuses = {500, *op.errors}
    if mounted.access != PUBLIC:
        statuses |= {401, 403}
        operation["security"] = [{"admin": []}] if mounted.access == OPERATOR else [{"bearer": []}]
        if mounted.access != OPERATOR:
            statuses.add(429)
    else:
        operation["security"] = []
    if params or mounted.access != OPERATOR:
        statuses.add(404)  # an id that is not one; a path segment that leads nowhere
    if op.body is not None or op.query or params:
        statuses.add(422)
    if mounted.access == SENDING:
        operation["description"] = "A `sending_access` key may call it."
    for status in sorted(statuses):
        responses[str(status)] = {"description": _ERROR_TEXT[status],
                                  "content": {"application/json": {"schema": envelope}}}
    operation["responses"] = responses
    return operation


def _surface_tag(mounted: Mounted) -> str:
    if mounted.access == OPERATOR:
        return "operator"
    if mounted.access == PUBLIC:
        return "public"
    return "native" if mounted.surface == NATIVE else "main"


def _link_created(paths: dict[str, dict]) -> None:
    """
    OpenAPI links from each create (POST on a collection answering an ``id``) to the routes
    under that collection's ``/{param}``, the new id as the parameter: clients (and
    schemathesis's stateful phase) follow them from a created resource to its operations.
    """
    for path, item in paths.items():
        create = item.get("post")
        if create is None or path.endswith("}"):
            continue
        for status, response in create["responses"].items():
            schema = response.get("content", {}).get("application/json", {}).get("schema", {})
            if not status.startswith("2") or "id" not in schema.get("required", ()):
                continue
            links = {}
            for other, other_item in paths.items():
                match = re.fullmatch(re.escape(path) + r"/\{(\w+)\}(/.*)?", other)
                if match is None:
                    continue
                for operation in other_item.values():
                    links[operation["operationId"]] = {
                        "operationId": operation["operationId"],
                        "parameters": {f"path.{match.group(1)}": "$response.body#/id"},
                    }
            if links:
                response["links"] = links


def document(mounted: list[Mounted], server_url: str | None = None) -> dict:
    """The OpenAPI 3.1 document of these routes; raises ``Undocumented`` naming any without an entry."""
    missing = sorted({_key(m) for m in mounted if _key(m) not in OPERATIONS})
    if missing:
        raise Undocumented("routes without an entry in mailsvc/http/openapi.py OPERATIONS: " + ", ".join(missing))
    paths: dict[str, dict] = {}
    for m in mounted:
        oas_path, params = _openapi_path(m.path)
        paths.setdefault(oas_path, {})[m.method.lower()] = _operation(m, OPERATIONS[_key(m)], params)
    _link_created(paths)
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "mailsvc",
            "version": VERSION,
            "description": "The main API (no prefix, the compatible contract), the native API (/v1) and the"
                           " operator API (/admin/v1) of one mailsvc node. Errors: the main surface answers"
                           " {statusCode, name, message}; native and operator routes answer"
                           " {error: {code, message, field, request_id}}.",
        },
        "tags": [{"name": "main"}, {"name": "native"}, {"name": "operator"}, {"name": "public"}],
        "paths": paths,
        "components": COMPONENTS,
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc


class OpenApiResource:
    """Serves the document of the router it is mounted on, generated at the first request."""

    def __init__(self, router, public_url: str = ""):
        self._router = router
        self._public_url = public_url
        self._rendered: bytes | None = None

    @route("GET", "/openapi.json", access=PUBLIC)
    async def openapi(self, request, _):
        if self._rendered is None:
            self._rendered = json.dumps(document(self._router.mounted, self._public_url or None)).encode("utf-8")
        return Reply(200, self._rendered)


__all__ = ["document", "OPERATIONS", "Op", "Undocumented", "VERSION", "MAIN", "NATIVE"]
