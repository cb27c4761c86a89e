"""
The operator API routes of the queue, the operator tokens, the audit log and the tenants list,
faked in memory on loopback with the shapes docs/decisions.md states ("The delivery queue in the
operator's hands", "Named operator tokens and the audit log"), so that the command line is tested against
their shapes until it can be tested against the real routes. Every request is recorded.
"""

from __future__ import annotations

import collections
import json
import uuid

import attrs
from klein import Klein
from twisted.internet import reactor
from twisted.web.server import Site

STATES = ("due", "deferred", "in_flight", "held")
FILTERS = ("destination", "tenant_id", "state", "code", "min_age_seconds")
NOW = "2026-11-26T12:00:00.000Z"


@attrs.define
class Delivery:
    destination: str
    tenant_id: str
    state: str = "deferred"
    code: int | None = 451
    text: str = "4.7.1 try again later"
    age: int = 600
    held_reason: str | None = None
    id: str = attrs.Factory(lambda: str(uuid.uuid4()))

    def row(self) -> dict:
        return {"object": "queued_delivery", "id": self.id, "email_id": str(uuid.uuid5(uuid.NAMESPACE_URL, self.id)),
                "tenant_id": self.tenant_id, "recipient": f"someone@{self.destination}",
                "destination": self.destination, "state": self.state, "attempts": 2,
                "last_response": None if self.code is None else {"code": self.code, "text": self.text},
                "next_attempt_at": NOW, "created_at": NOW, "retry_until": NOW, "held_reason": self.held_reason}


@attrs.define
class Seen:
    method: str
    path: str
    query: dict[str, str]
    body: dict | None


def _error(request, status: int, code: str, message: str, field: str | None = None) -> str:
    request.setResponseCode(status)
    return json.dumps({"error": {"code": code, "message": message, "field": field, "request_id": "req_fake"}})


class FakeOperatorApi:
    app = Klein()

    def __init__(self, token: str):
        self.token = token
        self.deliveries: list[Delivery] = []
        self.holds: list[dict] = []
        self.tenants: list[dict] = []
        self.tokens: list[dict] = []
        self.audit: list[dict] = []
        self.seen: list[Seen] = []
        self.url = ""
        self._port = None

    def start(self) -> None:
        self._port = reactor.listenTCP(0, Site(self.app.resource()), interface="127.0.0.1")
        self.url = f"http://127.0.0.1:{self._port.getHost().port}"

    async def stop(self) -> None:
        await self._port.stopListening()

    # -- plumbing ------------------------------------------------------------------------------

    def _enter(self, request) -> str | None:
        """Records the request; an error body unless the operator token came with it."""
        request.setHeader(b"Content-Type", b"application/json")
        raw = request.content.read()
        self.seen.append(Seen(request.method.decode(), request.path.decode(),
                              {k.decode(): v[0].decode() for k, v in request.args.items()},
                              json.loads(raw) if raw else None))
        given = (request.getHeader(b"authorization") or b"").decode()
        if not given:
            return _error(request, 401, "missing_api_key", "Missing the operator token")
        if given != f"Bearer {self.token}":
            return _error(request, 403, "forbidden", "Not the operator token")
        return None

    @staticmethod
    def _page(request, rows: list[dict]) -> str:
        args = {k.decode(): v[0].decode() for k, v in request.args.items()}
        limit = int(args.get("limit", 20))
        if "after" in args:
            rows = rows[[r["id"] for r in rows].index(args["after"]) + 1:]
        return json.dumps({"object": "list", "has_more": len(rows) > limit, "data": rows[:limit]})

    def _matching(self, filters: dict) -> list[Delivery]:
        def fits(d: Delivery) -> bool:
            return ((filters.get("destination") in (None, d.destination))
                    and (filters.get("tenant_id") in (None, d.tenant_id))
                    and (filters.get("state") in (None, d.state))
                    and (filters.get("code") is None or int(filters["code"]) == d.code)
                    and (filters.get("min_age_seconds") is None or d.age >= int(filters["min_age_seconds"])))
        return [d for d in self.deliveries if fits(d)]

    def _group(self, rows: list[Delivery]) -> dict:
        states = collections.Counter(d.state for d in rows)
        responses = collections.Counter((d.code, d.text) for d in rows if d.code is not None)
        return {"count": len(rows), "states": {s: states.get(s, 0) for s in STATES},
                "oldest_age_seconds": max(d.age for d in rows), "next_attempt_at": NOW,
                "top_responses": [{"code": c, "text": t, "count": n} for (c, t), n in responses.most_common(3)]}

    # -- the routes ----------------------------------------------------------------------------

    @app.route("/admin/v1/queue", methods=["GET"])
    def summary(self, request):
        refused = self._enter(request)
        if refused:
            return refused
        by = collections.defaultdict(list)
        for d in self.deliveries:
            by[("destination", d.destination)].append(d)
            by[("tenant", d.tenant_id)].append(d)
        states = collections.defaultdict(list)
        for d in self.deliveries:
            states[d.state].append(d)

        def hold(kind: str, value: str) -> dict | None:
            found = next((h for h in self.holds if h["kind"] == kind and h["value"] == value), None)
            return None if found is None else {k: found[k] for k in ("reason", "created_at", "created_by")}

        groups = sorted(by.items(), key=lambda item: -len(item[1]))
        return json.dumps({
            "object": "queue_summary", "generated_at": NOW,
            "by_state": [{"state": s, "count": len(states[s]),
                          "oldest_age_seconds": max((d.age for d in states[s]), default=None)} for s in STATES],
            "by_destination": [{"destination": value, "mx": f"mx.{value}", **self._group(rows),
                                "hold": hold("destination", value)}
                               for (kind, value), rows in groups if kind == "destination"],
            "by_tenant": [{"tenant_id": value, "tenant_name": f"tenant {value[:4]}", **self._group(rows),
                           "hold": hold("tenant", value)} for (kind, value), rows in groups if kind == "tenant"],
            "holds": self.holds,
        })

    @app.route("/admin/v1/queue/deliveries", methods=["GET"])
    def deliveries(self, request):
        refused = self._enter(request)
        if refused:
            return refused
        filters = {k: v for k, v in self.seen[-1].query.items() if k in FILTERS}
        return self._page(request, [d.row() for d in self._matching(filters)])

    @app.route("/admin/v1/queue/<action>", methods=["POST"])
    def act(self, request, action: str):
        refused = self._enter(request)
        if refused:
            return refused
        body = dict(self.seen[-1].body or {})
        reason = body.pop("reason", None)
        filters = {k: v for k, v in body.items() if k in FILTERS}
        if action not in ("retry", "hold", "release", "bounce"):
            return _error(request, 404, "not_found", "Not found")
        if bool(body.get("ids")) == bool(filters):
            return _error(request, 422, "validation_error", "ids or filters (one of them)", "ids")
        if action == "hold" and not reason:
            return _error(request, 422, "validation_error", "reason is required", "reason")
        rows = [d for d in self.deliveries if d.id in body["ids"]] if body.get("ids") else self._matching(filters)
        for d in rows:
            if action == "hold":
                d.state, d.held_reason = "held", reason
            elif action == "release" and d.state == "held":
                d.state, d.held_reason = "due", None
            elif action == "retry" and d.state == "deferred":
                d.state = "due"
            elif action == "bounce":
                self.deliveries.remove(d)
        if action == "hold" and set(filters) in ({"destination"}, {"tenant_id"}):
            kind = "destination" if "destination" in filters else "tenant"
            self.holds.append({"id": str(uuid.uuid4()), "kind": kind, "value": next(iter(filters.values())),
                               "reason": reason, "created_at": NOW, "created_by": "fake operator"})
        self.audit.append({"object": "audit_entry", "id": str(uuid.uuid4()), "at": NOW, "actor": "fake operator",
                           "action": f"queue.{action}", "filter": filters or {"ids": body["ids"]},
                           "count": len(rows), "detail": {"reason": reason} if reason else {}})
        return json.dumps({"object": "queue_action", "action": action, "count": len(rows)})

    @app.route("/admin/v1/operator-tokens", methods=["GET"])
    def list_tokens(self, request):
        return self._enter(request) or json.dumps(
            {"object": "list", "has_more": False, "data": [{k: v for k, v in t.items() if k != "token"}
                                                            for t in self.tokens]})

    @app.route("/admin/v1/operator-tokens", methods=["POST"])
    def create_token(self, request):
        refused = self._enter(request)
        if refused:
            return refused
        made = {"object": "operator_token", "id": str(uuid.uuid4()), "name": self.seen[-1].body["name"],
                "created_at": NOW, "last_used_at": None, "token": "op_" + uuid.uuid4().hex}
        self.tokens.append(made)
        request.setResponseCode(201)
        return json.dumps(made)

    @app.route("/admin/v1/operator-tokens/<token_id>", methods=["DELETE"])
    def revoke_token(self, request, token_id: str):
        refused = self._enter(request)
        if refused:
            return refused
        if token_id not in [t["id"] for t in self.tokens]:
            return _error(request, 404, "not_found", "Operator token not found")
        self.tokens = [t for t in self.tokens if t["id"] != token_id]
        return json.dumps({"object": "operator_token", "id": token_id, "deleted": True})

    @app.route("/admin/v1/audit", methods=["GET"])
    def audit_log(self, request):
        return self._enter(request) or self._page(request, list(reversed(self.audit)))

    @app.route("/admin/v1/tenants", methods=["GET"])
    def list_tenants(self, request):
        refused = self._enter(request)
        if refused:
            return refused
        query = self.seen[-1].query
        rows = [t for t in self.tenants if query.get("q", "").lower() in t["name"].lower()
                and query.get("status") in (None, t["status"])]
        return self._page(request, rows)

