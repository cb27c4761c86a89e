"""
The OpenAPI 3.1 document of every route the router serves, served at ``/openapi.json``.
It is generated: paths, methods, surfaces, security and error envelopes come from the router's
table (``Router.mounted``), request and success schemas from ``OPERATIONS`` below, keyed by
``"METHOD /path"`` as the handler's ``@route`` spells it. A ``/v1`` route (with ``native_ok``
where replies differ) and a ``/dashboard`` copy (``Mounted.mirror_of``: tagged ``dashboard``,
session cookie and CSRF header as security) share their main route's entry. A route without an
entry makes ``document()`` raise ``Undocumented``: a new route needs its ``Op`` line here.
"""

from __future__ import annotations

import json
import re

import attrs

from mailsvc.domain.audit import ACTOR_KINDS
from mailsvc.http.errors import MAIN, NATIVE
from mailsvc.http.router import (
    CONSOLE_SIGN_IN,
    OPERATOR,
    OPERATOR_SESSION,
    PUBLIC,
    SENDING,
    SESSION,
    SESSION_FRAME,
    SIGN_IN,
    Mounted,
    Reply,
    route,
)

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
ROLE = {"enum": ["owner", "member"]}
USER_FIELDS = dict(object={"const": "user"}, id=UUID, email=STR, role=ROLE, status={"enum": ["active", "invited"]},
                   two_factor=BOOL, created_at=STR)
USER_REQUIRED = ("object", "id", "email", "role", "status", "created_at")
USER = obj(USER_REQUIRED, **USER_FIELDS)
#: A sign-in's reply: the user and the CSRF token of the session its cookie carries.
SIGNED_IN = obj((*USER_REQUIRED, "csrf_token"), **USER_FIELDS, csrf_token=STR)
OPERATOR_FIELDS = dict(object={"const": "operator"}, id=UUID, email=STR, name=STR,
                       status={"enum": ["active", "invited"]}, two_factor=BOOL, created_at=STR)
OPERATOR_REQUIRED = ("object", "id", "email", "name", "status", "created_at")
OPERATOR_LINK = obj((*OPERATOR_REQUIRED, "set_password_url"), **OPERATOR_FIELDS, set_password_url=STR)
OPERATOR_SIGNED_IN = obj((*OPERATOR_REQUIRED, "csrf_token"), **OPERATOR_FIELDS, csrf_token=STR)
#: A right password of someone with two-factor sign-in: no cookie yet; the challenge, with a code, signs in.
CHALLENGE = obj(("object", "challenge", "email", "methods"), object={"const": "two_factor_challenge"},
                challenge=STR, email=STR, methods={"type": "array", "items": {"enum": ["totp", "recovery_code"]}})
SIGNED_IN_OR_CHALLENGE = {"oneOf": [SIGNED_IN, CHALLENGE]}
OPERATOR_SIGNED_IN_OR_CHALLENGE = {"oneOf": [OPERATOR_SIGNED_IN, CHALLENGE]}
SECOND_STEP = obj(("challenge",), challenge=STR, code=STR, recovery_code=STR)
TWO_FACTOR = obj(("object", "enabled", "recovery_codes_left"), object={"const": "two_factor"}, enabled=BOOL,
                 enabled_at=NULLABLE_STR, recovery_codes_left=INT, required_by_account=BOOL)
ENROLMENT = obj(("object", "secret", "otpauth_uri"), object={"const": "two_factor_enrolment"}, secret=STR,
                otpauth_uri=STR, digits=INT, period=INT, algorithm=STR)
ENROLLED = obj(("object", "enabled", "recovery_codes"), object={"const": "two_factor"}, enabled={"const": True},
               recovery_codes={"type": "array", "items": STR})
CODE = obj(("code",), code=STR)
RESET = obj(("object", "email", "enabled"), object={"const": "two_factor"}, email=STR, enabled={"const": False})
TURN_OFF = obj(("password",), password=STR, code=STR, recovery_code=STR)
TURNED_OFF = obj(("object", "enabled"), object={"const": "two_factor"}, enabled={"const": False})
SESSION_ROW = obj(("object", "id", "created_at", "last_seen_at", "expires_at", "current"), object={"const": "session"},
                  id=UUID, created_at=STR, last_seen_at=STR, expires_at=STR, user_agent=NULLABLE_STR,
                  client=NULLABLE_STR, current=BOOL)
#: A user with a set-password link (an invitation, a reset).
USER_LINK = obj((*USER_REQUIRED, "set_password_url"), **USER_FIELDS, set_password_url=STR)
USER_BODY = obj(("email",), email=STR, role=ROLE)
PASSWORD = {"type": "string", "minLength": 10, "maxLength": 1024}  # domain/users.py
DASHBOARD_USAGE = obj(("day", "daily_quota", "month", "monthly_quota"), day=INT, daily_quota=INT, month=INT,
                      monthly_quota=INT)
ACCOUNT = obj(("object", "id", "name", "plan", "status"), object={"const": "account"}, id=UUID, name=STR,
              plan={"enum": ["free", "starter", "growth", "scale"]}, status=STR, sandbox=BOOL, daily_quota=INT,
              monthly_quota=INT, max_domains={"type": ["integer", "null"]}, send_rate_per_sec=INT,
              api_rate_per_sec=INT)
NULLABLE_INT = {"type": ["integer", "null"]}
LIST_ONLY = obj(("object", "has_more", "data"), object={"const": "list"}, has_more={"const": False})
#: A static file of the web UI, and what else its type may be.
UI_TYPES = ("text/javascript", "text/css", "image/svg+xml", "image/png")
NUMBER = {"type": "number"}
NULLABLE_UUID = {"type": ["string", "null"], "format": "uuid"}
#: A SpamAssassin score (mail/spam.py ``SpamScore.as_dict``): ``POST /emails/check``'s reply.
SPAM_SCORE = obj(("object", "score", "threshold", "is_spam", "rules"), object={"const": "spam_score"},
                 score=NUMBER, threshold=NUMBER, is_spam=BOOL,
                 rules={"type": "array", "items": obj(("name", "score", "description"), name=STR, score=NUMBER,
                                                      description=STR)})
#: A preview's ``spam`` (with spam.spamd set): the score, or why spamd gave none (the preview still answers).
PREVIEW_SPAM = {"anyOf": [SPAM_SCORE, obj(("object", "error"), object={"const": "spam_score"}, error=STR)]}
BROADCAST_STATUS = {"enum": ["draft", "scheduled", "queued", "sending", "sent", "canceled", "failed"]}
#: A template's create and PATCH body (domain/templates.py ``FIELDS``).
TEMPLATE_FIELDS = dict(name=STR, alias=STR, **{"from": STR}, subject=STR, reply_to=STR_OR_LIST, html=STR, text=STR,
                       builder=OBJECT, variables={"type": "array", "items": obj(
                           ("key",), key=STR, type={"enum": ["string", "number"]},
                           fallback_value={"type": ["string", "number"]})})
#: A broadcast's create and PATCH body (domain/broadcasts.py ``broadcast_fields``; SPEC "Broadcasts").
BROADCAST_FIELDS = dict(segment_id=UUID, audience_id=UUID, name=STR, **{"from": STR}, subject=STR,
                        reply_to=STR_OR_LIST, preview_text=STR, html=STR, text=STR,
                        topic_id={"enum": [None, ""]})
#: SPEC "Broadcast", as ``GET /broadcasts/{id}`` shows it (app/broadcasts.py ``resource``).
BROADCAST = obj(
    ("object", "id", "name", "segment_id", "audience_id", "from", "subject", "reply_to", "preview_text", "html",
     "text", "status", "created_at", "scheduled_at", "sent_at", "topic_id", "recipients", "stats"),
    object={"const": "broadcast"}, id=UUID, name=STR, segment_id=NULLABLE_UUID, audience_id=NULLABLE_UUID,
    **{"from": STR}, subject=STR, reply_to={"type": "array", "items": STR}, preview_text=STR,
    html=STR, text=STR, status=BROADCAST_STATUS, created_at=STR, scheduled_at=NULLABLE_STR,
    sent_at=NULLABLE_STR, topic_id={"type": "null"}, recipients=INT,
    stats={"type": "object", "additionalProperties": INT},
    progress=obj(("done", "total"), done=INT, total=INT),
    wait_reason={"enum": [None, "daily_quota", "monthly_quota", "account_paused"]}, wait_until=NULLABLE_STR,
    failure=NULLABLE_STR)
#: An item of ``GET /broadcasts`` (app/broadcasts.py ``list_item``).
BROADCAST_ITEM = obj(("id", "name", "segment_id", "audience_id", "status", "created_at", "scheduled_at", "sent_at"),
                     id=UUID, name=STR, segment_id=NULLABLE_UUID, audience_id=NULLABLE_UUID, status=BROADCAST_STATUS,
                     created_at=STR, scheduled_at=NULLABLE_STR, sent_at=NULLABLE_STR, topic_id={"type": "null"})
BROADCAST_WRITTEN = obj(("object", "id"), object={"const": "broadcast"}, id=UUID)
NULLABLE_RATE = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
#: ``GET /domains/{id}/dmarc`` (app/domains.py ``dmarc``): per UTC day, newest first, each source's share aligned.
DMARC = obj(
    ("object", "domain_id", "domain", "days", "data"), object={"const": "dmarc_summary"}, domain_id=UUID,
    domain=STR, days=INT,
    data={"type": "array", "items": obj(
        ("date", "messages", "dkim_pass_rate", "spf_pass_rate", "sources"), date=STR, messages=INT,
        dkim_pass_rate=NULLABLE_RATE, spf_pass_rate=NULLABLE_RATE,
        sources={"type": "array", "items": obj(
            ("source_ip", "messages", "dkim_pass_rate", "spf_pass_rate", "reporters"), source_ip=STR, messages=INT,
            dkim_pass_rate=NULLABLE_RATE, spf_pass_rate=NULLABLE_RATE,
            reporters={"type": "array", "items": STR})})})
DESTINATION_DEFAULT = obj(("object", "pattern", "concurrency", "rate_per_sec"),
                          object={"const": "destination_default"}, pattern=STR, concurrency=INT, rate_per_sec=NUMBER)

INBOX_ITEM = obj(("object", "id", "email_id", "from", "to", "subject", "outcome", "simulated", "created_at"),
                 object={"const": "inbox_message"}, id=UUID, email_id=UUID, to={"type": "array", "items": STR},
                 outcome={"enum": ["delivered", "bounced", "complained", "captured"]}, simulated=BOOL)
CHECK = obj(("result", "detail"), result=STR, domain=STR, detail=STR)
INBOX_MESSAGE = obj(
    (*INBOX_ITEM["required"], "return_path", "html", "text", "raw", "headers", "attachments", "checks"),
    **INBOX_ITEM["properties"], return_path=STR, html=NULLABLE_STR, text=NULLABLE_STR, html_url=STR, raw=STR,
    headers={"type": "array", "items": {"type": "array", "items": STR}},
    attachments={"type": "array", "items": obj(("content_type", "size"), content_type=STR, size=INT)},
    checks=obj(("simulated", "dkim", "spf", "dmarc", "list_unsubscribe", "spam"), simulated=BOOL,
               dkim={"type": "array", "items": CHECK}, spf=CHECK, dmarc=CHECK,
               list_unsubscribe=obj(("one_click",), list_unsubscribe=NULLABLE_STR,
                                    list_unsubscribe_post=NULLABLE_STR, one_click=BOOL),
               spam={"type": ["object", "null"]}))

# The queue, the audit log and the named operator tokens (issue 31)
NULLABLE_ISO = {"type": ["string", "null"]}
QUEUE_STATES = {"enum": ["due", "deferred", "in_flight", "held"]}
QUEUE_FILTERS = dict(destination=STR, tenant_id=UUID, state=QUEUE_STATES, code={"type": "integer", "minimum": 200,
                     "maximum": 599}, min_age_seconds={"type": "integer", "minimum": 0})
QUEUE_QUERY = tuple((name, schema) for name, schema in QUEUE_FILTERS.items())
QUEUE_ACTION_BODY = obj(**QUEUE_FILTERS, ids={"type": "array", "items": UUID, "minItems": 1, "maxItems": 1000})
QUEUE_HOLD = obj(("reason", "created_at", "created_by"), reason=STR, created_at=STR, created_by=STR)
QUEUE_GROUP = dict(
    count=INT, states=obj(("due", "deferred", "in_flight", "held"), due=INT, deferred=INT, in_flight=INT, held=INT),
    oldest_age_seconds={"type": ["integer", "null"]}, next_attempt_at=NULLABLE_ISO,
    top_responses={"type": "array", "items": obj(("code", "text", "count"), code={"type": ["integer", "null"]},
                                                   text=STR, count=INT)},
    hold={"anyOf": [{"type": "null"}, QUEUE_HOLD]},
)
QUEUE_GROUP_REQUIRED = ("count", "states", "oldest_age_seconds", "next_attempt_at", "top_responses", "hold")
QUEUE_SUMMARY = obj(
    ("object", "generated_at", "by_state", "by_destination", "by_tenant", "holds"),
    object={"const": "queue_summary"}, generated_at=STR,
    by_state={"type": "array", "items": obj(("state", "count", "oldest_age_seconds"), state=QUEUE_STATES, count=INT,
                                            oldest_age_seconds={"type": ["integer", "null"]})},
    by_destination={"type": "array", "items": obj(("destination", "mx", *QUEUE_GROUP_REQUIRED), destination=STR,
                                                  mx=NULLABLE_STR, **QUEUE_GROUP)},
    by_tenant={"type": "array", "items": obj(("tenant_id", "tenant_name", *QUEUE_GROUP_REQUIRED), tenant_id=UUID,
                                             tenant_name=NULLABLE_STR, **QUEUE_GROUP)},
    holds={"type": "array", "items": obj(("id", "kind", "value", "reason", "created_at", "created_by"), id=UUID,
                                         kind={"enum": ["destination", "tenant"]}, value=STR, reason=STR,
                                         created_at=STR, created_by=STR)},
)
QUEUED_DELIVERY = obj(
    ("object", "id", "email_id", "tenant_id", "recipient", "destination", "state", "attempts", "last_response",
     "next_attempt_at", "created_at", "retry_until", "held_reason"),
    object={"const": "queued_delivery"}, id=UUID, email_id=UUID, tenant_id=UUID, recipient=STR, destination=STR,
    state=QUEUE_STATES, attempts=INT,
    last_response={"anyOf": [{"type": "null"}, obj(("code", "text"), code={"type": ["integer", "null"]}, text=STR)]},
    next_attempt_at=NULLABLE_ISO, created_at=STR, retry_until=STR, held_reason=NULLABLE_STR,
)


def queue_action(action: str) -> dict:
    return obj(("object", "action", "count"), object={"const": "queue_action"}, action={"const": action}, count=INT)


OPERATOR_TOKEN = dict(object={"const": "operator_token"}, id=UUID, name=STR, created_at=STR,
                      last_used_at=NULLABLE_ISO)
OPERATOR_TOKEN_REQUIRED = ("object", "id", "name", "created_at", "last_used_at")
AUDIT_ENTRY = obj(("object", "id", "at", "actor", "action", "filter", "count", "detail"),
                  object={"const": "audit_entry"}, id=UUID, at=STR, actor=STR, action=STR,
                  filter={"type": ["object", "null"]}, count={"type": ["integer", "null"]}, detail=OBJECT)


@attrs.frozen
class Op:
    """What one route takes and gives beside what the router knows (its path, access, surface)."""

    summary: str
    body: dict | None = None  # JSON request body schema; None: none read
    ok: dict = attrs.Factory(lambda: {200: OBJECT})  # status → JSON schema (None: no body)
    native_ok: dict | None = None  # the /v1 route's replies when they differ
    query: tuple[tuple[str, dict], ...] = ()
    headers: tuple[tuple[str, dict], ...] = ()
    main_only_headers: tuple[str, ...] = ()  # headers the /v1 route ignores (its batch is always atomic)
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
    "POST /suppressions/batch/add": Op("Add suppressions", obj(("emails",), emails={"type": "array", "items": STR}),
                                       {201: obj(("data",), data={"type": "array"})}),
    "POST /suppressions/batch/remove": Op("Remove suppressions (by address or by id)",
                                          obj(emails={"type": "array", "items": STR},
                                              ids={"type": "array", "items": UUID}),
                                          {200: obj(("data",), data={"type": "array"})}),
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
    # Topics are unavailable (SPEC): their routes answer 404 whatever the contact and the body.
    "GET /contacts/<path:key>/topics": Op("A contact's topics: unavailable, always 404", ok={}),
    "PATCH /contacts/<path:key>/topics": Op("A contact's topics: unavailable, always 404", ok={}),
    # Domains
    "POST /domains": Op("Add a sending domain", obj(("name",), name=STR, custom_return_path=STR, region=STR),
                        {201: obj(("id", "name", "status", "records"), id=UUID, name=STR, status=STR,
                                  records={"type": "array"})}),
    "GET /domains": Op("List domains", ok={200: listing()}, query=PAGE),
    "GET /domains/<domain_id>": Op("Retrieve a domain", ok={200: obj(("id", "name", "status"))}),
    "PATCH /domains/<domain_id>": Op("Update a domain", obj(tls={"enum": ["opportunistic", "enforced"]},
                                                            click_tracking=BOOL, open_tracking=BOOL), {200: RESOURCE}),
    "DELETE /domains/<domain_id>": Op("Delete a domain", ok={200: DELETED}, native_ok={204: None}),
    "GET /domains/<domain_id>/dmarc": Op("What receivers' DMARC aggregate reports say of the domain's mail",
                                         ok={200: DMARC}, query=(("days", {"type": "integer", "minimum": 1,
                                                                           "maximum": 366}),)),
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
                             main_only_headers=("x-batch-validation",), errors=(400, 409)),
    "GET /emails": Op("List e-mails", ok={200: listing()}, query=PAGE),
    "GET /emails/<email_id>": Op("Retrieve an e-mail", ok={200: obj(("object", "id"), object={"const": "email"},
                                                                   id=UUID)}),
    "PATCH /emails/<email_id>": Op("Reschedule an e-mail", obj(("scheduled_at",), scheduled_at=STR),
                                   {200: RESOURCE}, errors=(409,)),
    "POST /emails/<email_id>/cancel": Op("Cancel a scheduled e-mail", ok={200: RESOURCE}, errors=(409,)),
    "POST /emails/check": Op("Score a message with SpamAssassin; nothing is sent (503 without spam.spamd)",
                             obj(("from", "subject"), **{"from": STR}, to=STR_OR_LIST, subject=STR, html=STR,
                                 text=STR),
                             {200: SPAM_SCORE}, errors=(503,)),
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
    "POST /templates": Op("Create a template", obj(("name",), **TEMPLATE_FIELDS),
                          {201: RESOURCE}, errors=(409,)),
    "GET /templates": Op("List templates", ok={200: listing()}, query=PAGE),
    "GET /templates/<key>": Op("Retrieve a template's draft"),
    "PATCH /templates/<key>": Op("Update a template", obj(**TEMPLATE_FIELDS), {200: RESOURCE}, errors=(409,)),
    "DELETE /templates/<key>": Op("Delete a template", ok={200: RESOURCE}, native_ok={204: None}),
    "POST /templates/<key>/publish": Op("Publish a template", ok={200: RESOURCE}),
    "POST /templates/<key>/duplicate": Op("Duplicate a template", ok={200: RESOURCE, 201: RESOURCE}, errors=(409,)),
    "POST /templates/<key>/preview": Op(
        "Preview a template with variables (with spam.spamd, its spam score as `spam`)",
        obj(variables=OBJECT),
        {200: obj(("object", "subject", "html", "text"), object={"const": "template_preview"},
                  subject=NULLABLE_STR, html=STR, text=NULLABLE_STR, spam=PREVIEW_SPAM)}),
    # Broadcasts (SPEC "Broadcasts"; the native routes answer a write with the whole broadcast)
    "POST /broadcasts": Op(
        "Create a broadcast: a draft, or sent now (`send`) or at `scheduled_at`",
        {**obj(("from", "subject"), **BROADCAST_FIELDS, send=BOOL, scheduled_at=STR),
         "anyOf": [{"required": ["segment_id"]}, {"required": ["audience_id"]}]},
        {200: BROADCAST_WRITTEN}, {200: BROADCAST}, errors=(503,)),
    "GET /broadcasts": Op("List broadcasts, newest first", ok={200: listing(BROADCAST_ITEM)}, query=PAGE),
    "GET /broadcasts/<broadcast_id>": Op("Retrieve a broadcast with its counts", ok={200: BROADCAST}),
    "PATCH /broadcasts/<broadcast_id>": Op("Update a draft broadcast (409 broadcast_not_draft otherwise)",
                                           obj(**BROADCAST_FIELDS), {200: BROADCAST_WRITTEN}, {200: BROADCAST},
                                           errors=(409,)),
    "DELETE /broadcasts/<broadcast_id>": Op(
        "Delete a draft or scheduled broadcast, or a canceled or failed one whose mail has left the queue"
        " (409 broadcast_in_progress, broadcast_not_cancelable)",
        ok={200: obj(("object", "id", "deleted"), object={"const": "broadcast"}, id=UUID, deleted={"const": True})},
        native_ok={204: None}, errors=(409,)),
    "POST /broadcasts/<broadcast_id>/send": Op(
        "Send a draft now or at `scheduled_at` (409 broadcast_in_progress, broadcast_not_cancelable; 403 over the"
        " operator's spam threshold)", obj(scheduled_at=STR), {200: ID}, {200: BROADCAST}, errors=(409, 503)),
    "POST /broadcasts/<broadcast_id>/cancel": Op(
        "Cancel a broadcast: scheduled back to draft, queued or sending to canceled (409 broadcast_not_cancelable)",
        ok={200: BROADCAST_WRITTEN}, native_ok={200: BROADCAST}, errors=(409,)),
    "POST /broadcasts/<broadcast_id>/duplicate": Op("Duplicate a broadcast as a new draft",
                                                    ok={200: BROADCAST_WRITTEN}, native_ok={200: BROADCAST}),
    "POST /broadcasts/<broadcast_id>/preview": Op(
        "The broadcast rendered for a contact (`contact_id`, else a member of its segment, else none);"
        " with spam.spamd, its spam score as `spam`",
        obj(contact_id=UUID),
        {200: obj(("object", "subject", "html", "text", "contact_id"), object={"const": "broadcast_preview"},
                  subject=STR, html=NULLABLE_STR, text=NULLABLE_STR, contact_id=NULLABLE_UUID,
                  spam=PREVIEW_SPAM)}),
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
                        ok={200: obj(("object", "version", "roles", "onion"), object={"const": "node"}, version=STR,
                                     roles={"type": "array", "items": STR}, onion=NULLABLE_STR)}),
    "GET /admin/v1/destinations": Op(
        "Adaptive shaping: the current limits of every throttled destination, and the starting limits",
        ok={200: obj(("object", "source", "data", "defaults"), object={"const": "list"}, source=STR,
                     data={"type": "array", "items": obj(
                         ("object", "destination", "concurrency", "rate_per_sec", "throttled_at", "changed_at"),
                         object={"const": "destination"}, destination=STR, concurrency=INT, rate_per_sec=NUMBER,
                         throttled_at=NULLABLE_STR, changed_at=NULLABLE_STR)},
                     defaults={"type": "array", "items": DESTINATION_DEFAULT})}),
    "PUT /admin/v1/destinations/defaults/<pattern>": Op(
        "Set the starting limits of a host name or domain suffix",
        obj(("concurrency", "rate_per_sec"), concurrency={"type": "integer", "minimum": 1, "maximum": 1000},
            rate_per_sec={"type": "number", "exclusiveMinimum": 0, "maximum": 100000}),
        {200: DESTINATION_DEFAULT}),
    "DELETE /admin/v1/destinations/defaults/<pattern>": Op(
        "Remove a destination's starting limits",
        ok={200: obj(("object", "pattern", "deleted"), object={"const": "destination_default"}, pattern=STR,
                     deleted={"const": True})}),
    "DELETE /admin/v1/destinations/<destination>": Op(
        "Reset a destination's limits to the starting ones",
        ok={200: obj(("object", "destination", "deleted"), object={"const": "destination"}, destination=STR,
                     deleted={"const": True})}),
    "POST /admin/v1/tenants/<tenant_id>/users": Op("Create a dashboard user of a tenant (an owner unless `role`"
                                                   " says otherwise) and its set-password link", USER_BODY,
                                                   {201: {**USER_LINK, "required": [*USER_LINK["required"],
                                                                                    "tenant_id"]}}, errors=(409,)),
    "POST /admin/v1/users/password-link": Op(
        "A new set-password link for an existing user, found by e-mail address (it can take over the account)",
        obj(("email",), email={"type": "string", "format": "email"}),
        {200: {**USER_LINK, "required": [*USER_LINK["required"], "tenant_id"]}}, errors=(404,)),
    "GET /admin/v1/tenants": Op("List tenants, newest first; `q`: the name contains it (any case)",
                                ok={200: listing(TENANT)},
                                query=(*PAGE, ("q", STR), ("status", {"enum": ["active", "paused", "suspended"]}))),
    "GET /admin/v1/queue": Op("The delivery queue by state, destination and tenant, and the standing holds",
                              ok={200: QUEUE_SUMMARY}),
    "GET /admin/v1/queue/deliveries": Op("List queued deliveries, newest first", ok={200: listing(QUEUED_DELIVERY)},
                                         query=(*PAGE, *QUEUE_QUERY)),
    "POST /admin/v1/queue/retry": Op("Make queued deliveries due now (attempts and retry window untouched)",
                                     QUEUE_ACTION_BODY, {200: queue_action("retry")}),
    "POST /admin/v1/queue/hold": Op("Hold queued deliveries (a destination's or a tenant's new mail too)",
                                    {**QUEUE_ACTION_BODY, "required": ["reason"],
                                     "properties": {**QUEUE_ACTION_BODY["properties"], "reason": STR}},
                                    {200: queue_action("hold")}),
    "POST /admin/v1/queue/release": Op("Release held deliveries (and the standing holds the filter names)",
                                       QUEUE_ACTION_BODY, {200: queue_action("release")}),
    "POST /admin/v1/queue/bounce": Op("End queued deliveries as failed (`email.failed`, `content_expired`)",
                                      QUEUE_ACTION_BODY, {200: queue_action("bounce")}),
    "GET /admin/v1/operator-tokens": Op("List the named operator tokens",
                                        ok={200: listing(obj(OPERATOR_TOKEN_REQUIRED, **OPERATOR_TOKEN))}),
    "POST /admin/v1/operator-tokens": Op("Create a named operator token (shown once)", obj(("name",), name=STR),
                                         {201: obj((*OPERATOR_TOKEN_REQUIRED, "token"), **OPERATOR_TOKEN, token=STR)},
                                         errors=(409,)),
    "DELETE /admin/v1/operator-tokens/<token_id>": Op("Revoke a named operator token", ok={200: DELETED}),
    "GET /admin/v1/audit": Op("The audit log, newest first; `actor_kind`: token, operator (the console's) or user"
                              " (a dashboard user's); `tenant_id`: the entries about one tenant",
                              ok={200: listing(AUDIT_ENTRY)},
                              query=(*PAGE, ("actor_kind", {"enum": list(ACTOR_KINDS)}), ("tenant_id", UUID))),
    # AI generation and brand import (top plan)
    "POST /template-builder/ai/generate": Op(
        "Generate a builder document from a prompt (top plan; counts against the AI quota)",
        obj(("prompt",), prompt={"type": "string", "minLength": 1, "maxLength": 2000}, language=STR, theme=OBJECT,
            variables={"type": "array", "maxItems": 50, "items": STR}, template_id=UUID),
        {200: obj(("object", "subject", "preview_text", "document"), object={"const": "builder_ai_generation"},
                  subject=STR, preview_text=STR, document=OBJECT)},
        errors=(429, 502)),
    "POST /brand/import": Op(
        "Read a website's logos, colours and fonts into a proposed theme and brand (top plan)",
        obj(url=STR, apply=BOOL, ai=BOOL, language=STR),
        {200: obj(("object", "url", "logos", "colors", "fonts", "theme", "brand", "warnings", "applied"),
                  object={"const": "brand_import"}, url=STR, name=NULLABLE_STR, logos={"type": "array"},
                  colors={"type": "array"}, palette=OBJECT, fonts={"type": "array"}, socials={"type": "array"},
                  theme=OBJECT, brand=OBJECT, warnings={"type": "array", "items": STR}, applied=BOOL)},
        errors=(429,)),
    "GET /files/brand/<name>": Op("A logo a brand import stored", ok={200: None}, content_type="image/png",
                                  also=("image/jpeg", "image/gif", "image/webp", "image/svg+xml")),
    # The operator console (issue 31 §3; docs/decisions.md, "Operator console")
    "POST /admin/v1/operators": Op("Create an operator's console account and its set-password link (audited)",
                                   obj(("email",), email={"type": "string", "format": "email"}, name=STR),
                                   {201: OPERATOR_LINK}, errors=(409,)),
    "POST /admin/v1/operators/password-link": Op(
        "A new set-password link for an operator, found by e-mail address (audited)",
        obj(("email",), email={"type": "string", "format": "email"}), {200: OPERATOR_LINK}, errors=(404,)),
    "GET /console": Op("Redirects to /console/", ok={302: None}),
    "GET /console/": Op("The operator console's page", ok={200: None}, content_type="text/html"),
    "POST /console/auth/login": Op("An operator signs in: sets the console's cookie",
                                   obj(("email", "password"), email=STR, password=STR),
                                   {200: OPERATOR_SIGNED_IN_OR_CHALLENGE}, errors=(401, 429)),
    "POST /console/auth/password": Op("Set an operator's password with a set-password link's token; signs in",
                                      obj(("token", "password"), token=STR, password=PASSWORD),
                                      {200: OPERATOR_SIGNED_IN_OR_CHALLENGE}, errors=(401,)),
    "POST /console/auth/login/two-factor": Op("An operator's code (or recovery code) completes a sign-in",
                                              SECOND_STEP, {200: OPERATOR_SIGNED_IN}, errors=(401, 429)),
    "POST /admin/v1/operators/two-factor/reset": Op(
        "Turn off an operator's two-factor sign-in, found by e-mail address (a lost device; audited)",
        obj(("email",), email={"type": "string", "format": "email"}), {200: RESET}, errors=(404,)),
    "POST /admin/v1/users/two-factor/reset": Op(
        "Turn off a dashboard user's two-factor sign-in, found by e-mail address (a lost device; audited)",
        obj(("email",), email={"type": "string", "format": "email"}), {200: RESET}, errors=(404,)),
    "GET /console/two-factor": Op("Whether the operator has two-factor sign-in", ok={200: TWO_FACTOR}),
    "POST /console/two-factor/begin": Op("Begin enrolling an authenticator: its secret", ok={200: ENROLMENT},
                                         errors=(409,)),
    "POST /console/two-factor/confirm": Op("Turn two-factor sign-in on with a code: the recovery codes, shown once",
                                           CODE, {200: ENROLLED}, errors=(409, 422, 429)),
    "POST /console/two-factor/disable": Op("Turn two-factor sign-in off (the password and a code)", TURN_OFF,
                                           {200: TURNED_OFF}, errors=(422, 429)),
    "POST /console/auth/logout": Op("Sign out of the console: ends the session, clears the cookie",
                                    ok={200: obj(("object", "deleted"), object={"const": "session"},
                                                 deleted={"const": True})}),
    "GET /console/me": Op("The signed-in operator and the session's CSRF token", ok={200: OPERATOR_SIGNED_IN}),
    # The dashboard: sign-in, the user, users, the reads only it needs (docs/decisions.md, "Dashboard")
    "POST /auth/login": Op("Sign in: sets the session cookie (or, with two-factor sign-in, a challenge)",
                           obj(("email", "password"), email=STR, password=STR),
                           {200: SIGNED_IN_OR_CHALLENGE}, errors=(401, 429)),
    "POST /auth/password": Op("Set a password with a set-password link's token; signs in",
                              obj(("token", "password"), token=STR, password=PASSWORD),
                              {200: SIGNED_IN_OR_CHALLENGE}, errors=(401,)),
    "POST /auth/login/two-factor": Op("A code (or recovery code) completes a sign-in: sets the session cookie",
                                      SECOND_STEP, {200: SIGNED_IN}, errors=(401, 429)),
    "GET /dashboard/two-factor": Op("Whether the user has two-factor sign-in, and whether the account requires it",
                                    ok={200: TWO_FACTOR}),
    "POST /dashboard/two-factor/begin": Op("Begin enrolling an authenticator: its secret", ok={200: ENROLMENT},
                                           errors=(409,)),
    "POST /dashboard/two-factor/confirm": Op("Turn two-factor sign-in on with a code: the recovery codes, shown once",
                                             CODE, {200: ENROLLED}, errors=(409, 422, 429)),
    "POST /dashboard/two-factor/disable": Op("Turn two-factor sign-in off (the password and a code)", TURN_OFF,
                                             {200: TURNED_OFF}, errors=(422, 429)),
    "PATCH /dashboard/security": Op("Require two-factor sign-in of every member (owners only, enrolled first)",
                                    obj(("require_two_factor",), require_two_factor=BOOL),
                                    {200: obj(("object", "require_two_factor"), object={"const": "security"},
                                              require_two_factor=BOOL)}, errors=(422,)),
    "GET /dashboard/sessions": Op("The user's live sessions, newest first (`current`: this one)",
                                  ok={200: {**LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {
                                      "type": "array", "items": SESSION_ROW}}}}),
    "DELETE /dashboard/sessions/<session_id>": Op("End one of the user's sessions", ok={200: DELETED}),
    "POST /dashboard/sessions/sign-out-others": Op("Sign out everywhere but this session", ok={200: obj(
        ("object", "revoked"), object={"const": "list"}, revoked=INT)}),
    "POST /auth/logout": Op("Sign out: ends the session, clears the cookie",
                            ok={200: obj(("object", "deleted"), object={"const": "session"}, deleted={"const": True})}),
    "POST /dashboard/password": Op("Change the signed-in user's password; every other session ends",
                                   obj(("password", "current_password"), password=PASSWORD, current_password=STR),
                                   {200: SIGNED_IN}),
    "GET /me": Op("The signed-in user, the account, its usage today and this month, the CSRF token",
                  ok={200: obj((*USER_REQUIRED, "account", "usage", "csrf_token"), **USER_FIELDS, account=ACCOUNT,
                               two_factor_enrolment_required=BOOL,
                               usage=DASHBOARD_USAGE, csrf_token=STR)}),
    "GET /dashboard/users": Op("List the account's users", ok={200: {**LIST_ONLY, "properties": {
        **LIST_ONLY["properties"], "data": {"type": "array", "items": USER}}}}),
    "POST /dashboard/users": Op("Invite a user (owners only)", USER_BODY, {201: USER_LINK}, errors=(409,)),
    "POST /dashboard/users/<user_id>/password-link": Op("A new set-password link for a user (owners only)",
                                                        ok={200: USER_LINK}),
    "DELETE /dashboard/users/<user_id>": Op(
        "Remove a user (owners only; not oneself); `revoke_keys=true` also revokes the API keys they made",
        ok={200: obj(("object", "id", "deleted"), object=STR, id=STR, deleted={"const": True},
                     revoked_keys={"type": "array", "items": UUID})},
        query=(("revoke_keys", {"enum": ["true", "false"]}),), errors=(422,)),
    "GET /dashboard/stats": Op("Sends and outcomes per day over 30 days, and the quota used", ok={200: obj(
        ("object", "days", "usage"), object={"const": "stats"}, usage=DASHBOARD_USAGE,
        days={"type": "array", "items": obj(("day", "sent", "delivered", "bounced", "complained"), day=STR,
                                            sent=INT, delivered=INT, bounced=INT, complained=INT)})}),
    "GET /dashboard/emails/<email_id>/events": Op("An e-mail's events and its deliveries", ok={200: obj(
        ("object", "has_more", "data", "deliveries"), object={"const": "list"}, has_more={"const": False},
        data={"type": "array", "items": obj(("id", "type", "created_at", "data"), id=UUID, type=STR,
                                            created_at=STR, recipient=NULLABLE_STR, data=OBJECT)},
        deliveries={"type": "array", "items": obj(("recipient", "status", "attempts"), recipient=STR, status=STR,
                                                  attempts=INT, last_response=NULLABLE_STR, updated_at=STR)})}),
    "GET /dashboard/emails/<email_id>/html": Op("An e-mail's HTML for a sandboxed preview", ok={200: None},
                                                query=(("scheme", {"enum": ["dark"]}),), content_type="text/html"),
    "GET /dashboard/emails/<email_id>/particulars": Op(
        "An e-mail's Message-ID, idempotency key, Inbox copy and source (as signed, or as submitted)", ok={200: obj(
            ("object", "id", "message_id"), object={"const": "email_particulars"}, id=STR, message_id=STR,
            idempotency_key=NULLABLE_STR, inbox_id=NULLABLE_STR, source=NULLABLE_STR, source_signed=BOOL)}),
    "GET /dashboard/search/emails": Op("The e-mails by text (address, subject or id) and status, a page at a time",
                                       query=(("q", STR), ("status", STR), ("since", STR), ("until", STR),
                                              ("domain", STR), *PAGE),
                                       ok={200: {**LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {
                                           "type": "array", "items": obj(
                                               ("id", "from", "to", "subject", "created_at"), id=UUID, **{"from": STR},
                                               to={"type": "array", "items": STR}, subject=NULLABLE_STR,
                                               last_event=NULLABLE_STR, created_at=STR)}}}}),
    "GET /dashboard/webhooks/<webhook_id>/deliveries": Op(
        "A webhook's latest 50 deliveries with their payloads, and the last 24 hours' outcomes", ok={200: {
            **LIST_ONLY, "properties": {**LIST_ONLY["properties"], "last_24_hours": obj(
                ("delivered", "attempted"), delivered=INT, attempted=INT), "data": {
                "type": "array", "items": obj(("event_id", "event", "state", "attempts"), event_id=UUID, event=STR,
                                              state=STR, attempts=INT, response_status=NULLABLE_INT, response=STR,
                                              last_attempt_at={"type": ["string", "null"]}, created_at=STR,
                                              payload=STR)}}}}),
    "GET /dashboard/domains/<domain_id>/dmarc": Op("The domain's DMARC aggregate reports over the last 30 days",
                                                   ok={200: DMARC}),
    "GET /dashboard/domains/<domain_id>/dns": Op(
        "A domain's records, each with its stored status and what DNS answers now, and whether they can be "
        "published (not while the node's mail.hostname is localhost or has no dot: the reason says so)",
        ok={200: {**LIST_ONLY, "required": [*LIST_ONLY["required"], "records_publishable", "unpublishable_reason"],
                  "properties": {**LIST_ONLY["properties"], "records_publishable": BOOL,
                                 "unpublishable_reason": NULLABLE_STR, "data": {"type": "array", "items": obj(
                                     ("record", "name", "type", "value", "status"), record=STR, name=STR,
                                     type=STR, value=STR, priority=NULLABLE_INT, status=STR,
                                     live={"enum": ["match", "mismatch", "temporary"]})}}}}),
    "GET /dashboard/segment-sizes": Op("The account's segments with their number of contacts", ok={200: {
        **LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {"type": "array", "items": obj(
            ("id", "name", "contacts"), id=UUID, name=STR, contacts=INT)}}}}),
    "POST /dashboard/previews": Op("Keep HTML for a sandboxed preview frame (10 minutes)",
                                   obj(("html",), html=STR),
                                   {200: obj(("object", "id", "url"), object={"const": "preview"}, id=STR, url=STR)}),
    "GET /dashboard/previews/<token>": Op("A kept preview's HTML, under the e-mail preview policy", ok={200: None},
                                          content_type="text/html"),
    "GET /dashboard/inbox": Op("The development inbox: mail stopped at the door (test addresses, capture mode),"
                               " newest first", ok={200: listing(INBOX_ITEM)}, query=PAGE),
    "GET /dashboard/inbox/<inbox_id>": Op("A message of the development inbox as signed, with a receiver's checks",
                                          ok={200: INBOX_MESSAGE}),
    "GET /dashboard/inbox/<inbox_id>/html": Op("An inbox message's HTML for a sandboxed preview (scheme=dark: as a"
                                               " client in dark mode shows it)", ok={200: None},
                                               content_type="text/html", query=(("scheme", {"enum": ["dark"]}),)),
    "GET /dashboard/templates/<key>/published": Op(
        "A template's published version (for the draft-against-published diff)", ok={200: obj(
            ("object", "id"), object={"const": "template_version"}, id={"type": ["string", "null"]},
            **{"from": STR}, subject=STR, html=STR, text=STR)}),
    # The web UI: its static files, and the redirects to it
    "GET /": Op("Redirects to the web UI (/ui/)", ok={302: None}),
    "GET /ui": Op("Redirects to the web UI (/ui/)", ok={302: None}),
    "GET /ui/": Op("The web UI's page", ok={200: None}, content_type="text/html"),
    "GET /ui/<path:name>": Op("A static file of the web UI (script, style sheet, image)", ok={200: None},
                              content_type="text/html", also=UI_TYPES),
}

# --- error envelopes ---------------------------------------------------------------------------

COMPONENTS = {
    "schemas": {
        "MainError": {
            "type": "object", "additionalProperties": False,
            "required": ["statusCode", "name", "message"],
            "properties": {"statusCode": INT, "name": STR, "message": STR},
        },
        "DashboardError": {
            "type": "object", "additionalProperties": False,
            "required": ["statusCode", "name", "message"],
            "properties": {"statusCode": INT, "name": STR, "message": STR, "code": STR},
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
        "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "mailsvc_session",
                          "description": "A dashboard session: the cookie `POST /auth/login` sets."},
        "consoleCookie": {"type": "apiKey", "in": "cookie", "name": "mailsvc_operator",
                          "description": "An operator console session: the cookie `POST /console/auth/login` sets."},
        "csrfToken": {"type": "apiKey", "in": "header", "name": "X-CSRF-Token",
                      "description": "The session's CSRF token (`csrf_token` of the sign-in reply or of"
                                     " `GET /me`), required with the cookie on POST, PATCH and DELETE."},
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
    """The ``OPERATIONS`` entry of a route: a native or dashboard copy shares its main route's."""
    path = mounted.mirror_of or mounted.path
    if (mounted.surface == NATIVE or mounted.mirror_of) and path.startswith("/v1/"):
        path = path[len("/v1"):]
    return f"{mounted.method} {path}"


def _operation_id(method: str, oas_path: str) -> str:
    """``post_emails_email_id_cancel``; a path ending in ``/`` (``/``, ``/ui/``) ends in ``_index``."""
    name = (method.lower() + re.sub(r"[^A-Za-z0-9]+", "_", oas_path)).rstrip("_")
    return name + "_index" if oas_path.endswith("/") else name


def _operation(mounted: Mounted, op: Op, params: list[str]) -> dict:
    native = mounted.surface == NATIVE
    envelope = ref("NativeError" if native else "DashboardError"
                   if mounted.access in (SESSION, SESSION_FRAME, SIGN_IN, CONSOLE_SIGN_IN, OPERATOR_SESSION)
                   else "MainError")
    oas_path, _ = _openapi_path(mounted.path)
    operation: dict = {
        "operationId": _operation_id(mounted.method, oas_path),
        "summary": op.summary,
        "tags": [_surface_tag(mounted)],
    }
    parameters = [{"name": name, "in": "path", "required": True, "schema": STR} for name in params]
    parameters += [{"name": name, "in": "query", "required": False, "schema": schema} for name, schema in op.query]
    parameters += [{"name": name, "in": "header", "required": False, "schema": schema}
                   for name, schema in op.headers if not (native and name in op.main_only_headers)]
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
    if mounted.access in (SESSION, SESSION_FRAME):
        statuses |= {401, 403}  # no live session; a missing or wrong CSRF token
        if mounted.access == SESSION:
            statuses.add(429)  # the account's rate
        safe = mounted.method in ("GET", "HEAD")
        operation["security"] = [{"sessionCookie": []} if safe else {"sessionCookie": [], "csrfToken": []}]
    elif mounted.access == OPERATOR_SESSION:
        statuses |= {401, 403}  # no live console session; a missing or wrong CSRF token
        safe = mounted.method in ("GET", "HEAD")
        operation["security"] = [{"consoleCookie": []} if safe else {"consoleCookie": [], "csrfToken": []}]
    elif mounted.access in (SIGN_IN, CONSOLE_SIGN_IN):
        statuses.add(403)  # a state-changing request from another site
        operation["security"] = []
    elif mounted.access != PUBLIC:
        statuses |= {401, 403}
        operation["security"] = [{"admin": []}] if mounted.access == OPERATOR else [{"bearer": []}]
        if mounted.access != OPERATOR:
            statuses.add(429)
    else:
        operation["security"] = []
    if params or mounted.access not in (OPERATOR, OPERATOR_SESSION):
        statuses.add(404)  # an id that is not one; a path segment that leads nowhere
    if op.body is not None or op.query or params:
        statuses.add(422)
    if mounted.mirror_of is not None and mounted.access == OPERATOR_SESSION:
        operation["description"] = (f"The operator console's copy of `{mounted.method}"
                                    f" {_openapi_path(mounted.mirror_of)[0]}`: the same handler, body and replies,"
                                    " for a signed-in operator (audited as `operator:<email>`).")
    elif mounted.mirror_of is not None:
        operation["description"] = (f"The dashboard's copy of `{mounted.method} {_openapi_path(mounted.mirror_of)[0]}`:"
                                    " the same handler, body and replies, for a signed-in session.")
    elif mounted.access == SENDING:
        operation["description"] = "A `sending_access` key may call it."
    for status in sorted(statuses):
        responses[str(status)] = {"description": _ERROR_TEXT[status],
                                  "content": {"application/json": {"schema": envelope}}}
    operation["responses"] = responses
    return operation


def _surface_tag(mounted: Mounted) -> str:
    if mounted.access == OPERATOR_SESSION or mounted.path.startswith("/console"):
        return "console"
    if mounted.access in (SESSION, SESSION_FRAME, SIGN_IN):
        return "dashboard"
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
                           " operator API (/admin/v1) of one mailsvc node, and the dashboard's routes (/auth,"
                           " /me, /dashboard: a session cookie; every API-key route has a /dashboard copy)."
                           " Errors: the main surface and the dashboard answer {statusCode, name, message};"
                           " native and operator routes answer"
                           " {error: {code, message, field, request_id}}.",
        },
        "tags": [{"name": "main"}, {"name": "native"}, {"name": "operator"}, {"name": "public"},
                 {"name": "dashboard", "description": "A dashboard session's routes, and the /dashboard copy of"
                                                      " every API-key route"},
                 {"name": "console", "description": "The operator console's routes, and the /console copy of"
                                                    " every operator route (a console session)"}],
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
