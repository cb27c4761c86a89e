"""
The operator API's queue, audit log, named operator tokens and tenants list (the
contract the command line calls: docs/operations.md "The queue").
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.accounts import Accounts
from mailsvc.app.audit import AuditLog, OperatorTokens
from mailsvc.app.queue import Queue, last_response
from mailsvc.domain.audit import ACTOR_KINDS, audit_filter
from mailsvc.domain.queue import action_filter, hold_reason, parse_filter, token_name
from mailsvc.domain.tenant import STATUSES
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE, validation
from mailsvc.http.operation import (
    DELETED,
    INT,
    NULLABLE_ISO,
    NULLABLE_STR,
    OBJECT,
    PAGE,
    STR,
    UUID,
    Operation,
    listing,
    obj,
)
from mailsvc.http.operator import tenant_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import OPERATOR, Operator, Reply, route
from mailsvc.http.schemas import TENANT
from mailsvc.ids import parse_uuid

QUEUE_STATES = {"enum": ["due", "deferred", "in_flight", "held"]}
QUEUE_FILTERS: dict[str, dict] = dict(
    destination=STR, tenant_id=UUID, state=QUEUE_STATES, code={"type": "integer", "minimum": 200,
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

_FILTERS = ("destination", "tenant_id", "state", "code", "min_age_seconds")


def _args(request, names) -> dict:
    return {name: request.args[name.encode()][0].decode("utf-8", "replace")
            for name in names if request.args.get(name.encode())}


def _iso(at) -> str | None:
    return timefmt.iso(at) if at is not None else None


def delivery_json(row: dict) -> dict:
    return {
        "object": "queued_delivery", "id": str(row["id"]), "email_id": str(row["email_id"]),
        "tenant_id": str(row["tenant_id"]), "recipient": row["recipient"], "destination": row["destination"],
        "state": row["state"], "attempts": row["attempts"], "last_response": last_response(row["last_response"]),
        "next_attempt_at": _iso(row["due_at"]) if row["state"] != "held" else None,
        "created_at": _iso(row["created_at"]), "retry_until": _iso(row["retry_until"]),
        "held_reason": row["held_reason"],
    }


def token_json(row: dict) -> dict:
    return {"object": "operator_token", "id": str(row["id"]), "name": row["name"],
            "created_at": timefmt.iso(row["created_at"]),
            "last_used_at": timefmt.iso(row["last_used_at"]) if row["last_used_at"] else None}


def audit_json(row: dict) -> dict:
    return {"object": "audit_entry", "id": str(row["id"]), "at": timefmt.iso(row["at"]), "actor": row["actor"],
            "action": row["action"], "filter": row["filter"], "count": row["count"], "detail": row["detail"]}


class QueueResource:
    def __init__(self, queue: Queue, tokens: OperatorTokens, log: AuditLog, accounts: Accounts):
        self._queue = queue
        self._tokens = tokens
        self._log = log
        self._accounts = accounts

    # -- the queue ----------------------------------------------------------------------------

    @route("GET", "/admin/v1/queue", access=OPERATOR, surface=NATIVE,
           op=Operation("The delivery queue by state, destination and tenant, and the standing holds",
                        responses={200: QUEUE_SUMMARY}))
    async def summary(self, request, _):
        """The queue by state, destination and tenant, with the standing holds."""
        return await self._queue.summary()

    @route("GET", "/admin/v1/queue/deliveries", access=OPERATOR, surface=NATIVE,
           op=Operation("List queued deliveries, newest first", responses={200: listing(QUEUED_DELIVERY)},
                        query=(*PAGE, *QUEUE_QUERY)))
    async def deliveries(self, request, _):
        found = parse_filter(_args(request, _FILTERS), ids_allowed=False)
        rows, has_more = await self._queue.deliveries(found, page_of(request.args, 20))
        return envelope([delivery_json(r) for r in rows], has_more)

    @route("POST", "/admin/v1/queue/retry", access=OPERATOR, surface=NATIVE,
           op=Operation("Make queued deliveries due now (attempts and retry window untouched)",
                        QUEUE_ACTION_BODY, {200: queue_action("retry")}))
    async def retry(self, request, operator: Operator):
        count = await self._queue.retry(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "retry", "count": count}

    @route("POST", "/admin/v1/queue/hold", access=OPERATOR, surface=NATIVE,
           op=Operation("Hold queued deliveries (a destination's or a tenant's new mail too)",
                        {**QUEUE_ACTION_BODY, "required": ["reason"],
                         "properties": {**QUEUE_ACTION_BODY["properties"], "reason": STR}},
                        {200: queue_action("hold")}))
    async def hold(self, request, operator: Operator):
        body = read_json(request)
        found, reason = action_filter(body), hold_reason(body)
        count = await self._queue.hold(found, reason, operator.name)
        return {"object": "queue_action", "action": "hold", "count": count}

    @route("POST", "/admin/v1/queue/release", access=OPERATOR, surface=NATIVE,
           op=Operation("Release held deliveries (and the standing holds the filter names)",
                        QUEUE_ACTION_BODY, {200: queue_action("release")}))
    async def release(self, request, operator: Operator):
        count = await self._queue.release(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "release", "count": count}

    @route("POST", "/admin/v1/queue/bounce", access=OPERATOR, surface=NATIVE,
           op=Operation("End queued deliveries as failed (`email.failed`, `content_expired`)",
                        QUEUE_ACTION_BODY, {200: queue_action("bounce")}))
    async def bounce(self, request, operator: Operator):
        count = await self._queue.bounce(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "bounce", "count": count}

    # -- operator tokens and the audit log -----------------------------------------------------

    @route("GET", "/admin/v1/operator-tokens", access=OPERATOR, surface=NATIVE,
           op=Operation("List the named operator tokens",
                        responses={200: listing(obj(OPERATOR_TOKEN_REQUIRED, **OPERATOR_TOKEN))}))
    async def tokens(self, request, _):
        return envelope([token_json(r) for r in await self._tokens.list()], False)

    @route("POST", "/admin/v1/operator-tokens", access=OPERATOR, surface=NATIVE,
           op=Operation("Create a named operator token (shown once)", obj(("name",), name=STR),
                        {201: obj((*OPERATOR_TOKEN_REQUIRED, "token"), **OPERATOR_TOKEN, token=STR)},
                        errors=(409,)))
    async def create_token(self, request, operator: Operator):
        row, token = await self._tokens.create(token_name(read_json(request)), operator.name)
        return Reply(201, {**token_json(row), "token": token})

    @route("DELETE", "/admin/v1/operator-tokens/<token_id>", access=OPERATOR, surface=NATIVE,
           op=Operation("Revoke a named operator token", responses={200: DELETED}))
    async def delete_token(self, request, operator: Operator, token_id: str):
        await self._tokens.delete(parse_uuid(token_id), operator.name)
        return {"object": "operator_token", "id": token_id, "deleted": True}

    @route("GET", "/admin/v1/audit", access=OPERATOR, surface=NATIVE,
           op=Operation("The audit log, newest first; `actor_kind`: token, operator (the console's) or user"
                        " (a dashboard user's); `tenant_id`: the entries about one tenant",
                        responses={200: listing(AUDIT_ENTRY)},
                        query=(*PAGE, ("actor_kind", {"enum": list(ACTOR_KINDS)}), ("tenant_id", UUID))))
    async def audit(self, request, _):
        """Newest first; ``actor_kind``: token, operator (the console's) or user (a dashboard
        user's); ``tenant_id``: the entries about one tenant."""
        args = _args(request, ("actor_kind", "tenant_id"))
        found = audit_filter(args.get("actor_kind"), args.get("tenant_id"))
        rows, has_more = await self._log.entries(page_of(request.args, 20), found)
        return envelope([audit_json(r) for r in rows], has_more)

    # -- tenants -------------------------------------------------------------------------------

    @route("GET", "/admin/v1/tenants", access=OPERATOR, surface=NATIVE,
           op=Operation("List tenants, newest first; `q`: the name contains it (any case)",
                        responses={200: listing(TENANT)},
                        query=(*PAGE, ("q", STR), ("status", {"enum": ["active", "paused", "suspended"]}))))
    async def tenants(self, request, _):
        """Newest first; ``q``: the name contains it (any case); ``status``: one of the statuses."""
        args = _args(request, ("q", "status"))
        if "status" in args and args["status"] not in STATUSES:
            raise validation("status: one of " + ", ".join(STATUSES), "status")
        q = args.get("q", "")
        if len(q) > 200 or not q.isprintable():
            raise validation("q: at most 200 printable characters", "q")
        tenants, has_more = await self._accounts.tenants(args.get("q"), args.get("status"), page_of(request.args, 20))
        return envelope([tenant_json(t) for t in tenants], has_more)
