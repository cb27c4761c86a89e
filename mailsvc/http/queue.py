"""
The operator API's queue, audit log, named operator tokens and tenants list (the
contract the command line calls: docs/operations.md "The queue").
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.accounts import Accounts
from mailsvc.app.audit import AuditLog, OperatorTokens
from mailsvc.app.queue import Queue, last_response
from mailsvc.domain.audit import audit_filter
from mailsvc.domain.queue import action_filter, hold_reason, parse_filter, token_name
from mailsvc.domain.tenant import STATUSES
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE, validation
from mailsvc.http.operator import tenant_json
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import OPERATOR, Operator, Reply, route
from mailsvc.ids import parse_uuid

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

    @route("GET", "/admin/v1/queue", access=OPERATOR, surface=NATIVE)
    async def summary(self, request, _):
        """The queue by state, destination and tenant, with the standing holds."""
        return await self._queue.summary()

    @route("GET", "/admin/v1/queue/deliveries", access=OPERATOR, surface=NATIVE)
    async def deliveries(self, request, _):
        found = parse_filter(_args(request, _FILTERS), ids_allowed=False)
        rows, has_more = await self._queue.deliveries(found, page_of(request.args, 20))
        return envelope([delivery_json(r) for r in rows], has_more)

    @route("POST", "/admin/v1/queue/retry", access=OPERATOR, surface=NATIVE)
    async def retry(self, request, operator: Operator):
        count = await self._queue.retry(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "retry", "count": count}

    @route("POST", "/admin/v1/queue/hold", access=OPERATOR, surface=NATIVE)
    async def hold(self, request, operator: Operator):
        body = read_json(request)
        found, reason = action_filter(body), hold_reason(body)
        count = await self._queue.hold(found, reason, operator.name)
        return {"object": "queue_action", "action": "hold", "count": count}

    @route("POST", "/admin/v1/queue/release", access=OPERATOR, surface=NATIVE)
    async def release(self, request, operator: Operator):
        count = await self._queue.release(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "release", "count": count}

    @route("POST", "/admin/v1/queue/bounce", access=OPERATOR, surface=NATIVE)
    async def bounce(self, request, operator: Operator):
        count = await self._queue.bounce(action_filter(read_json(request)), operator.name)
        return {"object": "queue_action", "action": "bounce", "count": count}

    # -- operator tokens and the audit log -----------------------------------------------------

    @route("GET", "/admin/v1/operator-tokens", access=OPERATOR, surface=NATIVE)
    async def tokens(self, request, _):
        return envelope([token_json(r) for r in await self._tokens.list()], False)

    @route("POST", "/admin/v1/operator-tokens", access=OPERATOR, surface=NATIVE)
    async def create_token(self, request, operator: Operator):
        row, token = await self._tokens.create(token_name(read_json(request)), operator.name)
        return Reply(201, {**token_json(row), "token": token})

    @route("DELETE", "/admin/v1/operator-tokens/<token_id>", access=OPERATOR, surface=NATIVE)
    async def delete_token(self, request, operator: Operator, token_id: str):
        await self._tokens.delete(parse_uuid(token_id), operator.name)
        return {"object": "operator_token", "id": token_id, "deleted": True}

    @route("GET", "/admin/v1/audit", access=OPERATOR, surface=NATIVE)
    async def audit(self, request, _):
        """Newest first; ``actor_kind``: token, operator (the console's) or user (a dashboard
        user's); ``tenant_id``: the entries about one tenant."""
        args = _args(request, ("actor_kind", "tenant_id"))
        found = audit_filter(args.get("actor_kind"), args.get("tenant_id"))
        rows, has_more = await self._log.entries(page_of(request.args, 20), found)
        return envelope([audit_json(r) for r in rows], has_more)

    # -- tenants -------------------------------------------------------------------------------

    @route("GET", "/admin/v1/tenants", access=OPERATOR, surface=NATIVE)
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
