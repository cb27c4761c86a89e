"""
A faithful fake of the part of Cloudflare's v4 API that a DNS set-up uses, on loopback:
token verification, zone lookup, paged record lists, record creation and update, with the
envelope (``success``, ``errors``, ``messages``, ``result``, ``result_info``), status codes
and error codes the real API answers.

Tokens carry permissions: ``zone:read`` (Zone Read), ``dns:read`` and ``dns:edit`` (DNS
Read/Edit), and may be scoped to some zones only. ``down = True`` answers 503 to everything.
"""

from __future__ import annotations

import json
import uuid

import attrs
import pytest_twisted
from klein import Klein
from twisted.internet import defer, reactor
from twisted.web.server import Site

from mailsvc.domain.dnsplan import unquote_txt

ALL = frozenset({"zone:read", "dns:read", "dns:edit"})
NOW = "2026-11-22T10:00:00.000000Z"


@attrs.define
class Token:
    status: str = "active"  # active | disabled | expired
    permissions: frozenset[str] = ALL
    zones: frozenset[str] | None = None  # zone names; None: every zone


@attrs.define
class Zone:
    id: str
    name: str
    records: list[dict] = attrs.Factory(list)


class _Failure(Exception):
    def __init__(self, status: int, code: int, message: str):
        self.status, self.code, self.message = status, code, message


class FakeCloudflare:
    app = Klein()

    def __init__(self):
        self.tokens: dict[str, Token] = {}
        self.zones: dict[str, Zone] = {}
        self.max_per_page = 100
        self.down = False
        self.requests: list[tuple[str, str, dict]] = []  # method, path, query (never headers)
        self._port = None

    # Test set-up

    def token(self, value: str, **fields) -> Token:
        self.tokens[value] = Token(**fields)
        return self.tokens[value]

    def zone(self, name: str) -> Zone:
        zone = Zone(uuid.uuid4().hex, name)
        self.zones[zone.id] = zone
        return zone

    def add_record(self, zone: Zone, type: str, name: str, content: str, priority: int | None = None) -> dict:
        record = {
            "id": uuid.uuid4().hex, "zone_id": zone.id, "zone_name": zone.name, "name": name,
            "type": type, "content": content, "proxiable": False, "proxied": False, "ttl": 1,
            "settings": {}, "meta": {}, "comment": None, "tags": [], "created_on": NOW,
            "modified_on": NOW,
        }
        if type == "MX":
            record["priority"] = priority if priority is not None else 10
        zone.records.append(record)
        return record

    def records(self, name: str) -> list[dict]:
        return [r for zone in self.zones.values() for r in zone.records if r["name"] == name]

    def publish(self, dns_server) -> None:
        """Serve every TXT and MX record of every zone from the test DNS server."""
        for zone in self.zones.values():
            for name in {r["name"] for r in zone.records}:
                dns_server.remove(name)
            for r in zone.records:
                if r["type"] == "TXT":
                    dns_server.txt(r["name"], unquote_txt(r["content"]))
                elif r["type"] == "MX":
                    dns_server.mx(r["name"], r["content"], r["priority"])

    def start(self) -> str:
        self._port = reactor.listenTCP(0, Site(self.app.resource()), interface="127.0.0.1")
        return self.base_url

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port.getHost().port}/client/v4"

    async def stop(self) -> None:
        await defer.maybeDeferred(self._port.stopListening)

    # The API

    def _answer(self, request, handler, *args):
        request.setHeader(b"Content-Type", b"application/json")
        query = {k.decode(): v[0].decode() for k, v in request.args.items()}
        self.requests.append((request.method.decode(), request.path.decode(), query))
        try:
            if self.down:
                raise _Failure(503, 10000, "Service Unavailable")
            token = self._token(request)
            body = json.loads(request.content.read() or b"{}") if request.method in (b"POST", b"PATCH") else {}
            result, info = handler(token, query, body, *args)
        except _Failure as e:
            request.setResponseCode(e.status)
            return json.dumps({"success": False, "errors": [{"code": e.code, "message": e.message}],
                               "messages": [], "result": None})
        payload = {"success": True, "errors": [], "messages": [], "result": result}
        if info is not None:
            payload["result_info"] = info
        return json.dumps(payload)

    def _token(self, request) -> Token:
        header = (request.getHeader(b"authorization") or b"").decode()
        token = self.tokens.get(header[len("Bearer "):]) if header.startswith("Bearer ") else None
        if token is None:
            raise _Failure(401, 1000, "Invalid API Token")
        return token

    @staticmethod
    def _usable(token: Token) -> None:
        if token.status != "active":
            raise _Failure(401, 1000, "Invalid API Token")

    def _page(self, items: list, query: dict) -> tuple[list, dict]:
        per_page = min(int(query.get("per_page", 20)), self.max_per_page)
        page = int(query.get("page", 1))
        total_pages = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        return chunk, {"page": page, "per_page": per_page, "count": len(chunk),
                       "total_count": len(items), "total_pages": total_pages}

    def _zone_for(self, token: Token, zone_id: str, permission: str) -> Zone:
        zone = self.zones.get(zone_id)
        if zone is None:
            raise _Failure(404, 7003, "Could not route to /zones, perhaps your object identifier is invalid?")
        if permission not in token.permissions or (token.zones is not None and zone.name not in token.zones):
            raise _Failure(403, 10000, "Authentication error")
        return zone

    @app.route("/client/v4/user/tokens/verify", methods=["GET"])
    def verify(self, request):
        def handler(token, query, body):
            return {"id": uuid.uuid4().hex, "status": token.status}, None

        return self._answer(request, handler)

    @app.route("/client/v4/zones", methods=["GET"])
    def list_zones(self, request):
        def handler(token, query, body):
            self._usable(token)
            if "zone:read" not in token.permissions:
                raise _Failure(403, 9109, "Unauthorized to access requested resource")
            zones = [z for z in self.zones.values()
                     if token.zones is None or z.name in token.zones]
            if "name" in query:
                zones = [z for z in zones if z.name == query["name"]]
            page, info = self._page(zones, query)
            return [{"id": z.id, "name": z.name, "status": "active", "paused": False,
                     "type": "full", "name_servers": ["ada.ns.cloudflare.com"]} for z in page], info

        return self._answer(request, handler)

    @app.route("/client/v4/zones/<zone_id>/dns_records", methods=["GET"])
    def list_records(self, request, zone_id):
        def handler(token, query, body):
            self._usable(token)
            zone = self._zone_for(token, zone_id, "dns:read" if "dns:read" in token.permissions else "dns:edit")
            records = [r for r in zone.records
                       if ("name" not in query or r["name"] == query["name"])
                       and ("type" not in query or r["type"] == query["type"])]
            return self._page(records, query)

        return self._answer(request, handler)

    @app.route("/client/v4/zones/<zone_id>/dns_records", methods=["POST"])
    def create_record(self, request, zone_id):
        def handler(token, query, body):
            self._usable(token)
            zone = self._zone_for(token, zone_id, "dns:edit")
            name = str(body.get("name", "")).lower()
            if body.get("type") not in ("TXT", "MX", "CNAME", "A", "AAAA") or not body.get("content"):
                raise _Failure(400, 9005, "Content for record is invalid.")
            if not (name == zone.name or name.endswith("." + zone.name)):
                raise _Failure(400, 9007, "Record name is not in the zone.")
            if any(r["type"] == body["type"] and r["name"] == name and r["content"] == body["content"]
                   for r in zone.records):
                raise _Failure(400, 81058, "An identical record already exists.")
            return self.add_record(zone, body["type"], name, body["content"], body.get("priority")), None

        return self._answer(request, handler)

    @app.route("/client/v4/zones/<zone_id>/dns_records/<record_id>", methods=["PATCH"])
    def update_record(self, request, zone_id, record_id):
        def handler(token, query, body):
            self._usable(token)
            zone = self._zone_for(token, zone_id, "dns:edit")
            record = next((r for r in zone.records if r["id"] == record_id), None)
            if record is None:
                raise _Failure(404, 81044, "Record does not exist.")
            for field in ("content", "priority", "ttl"):
                if field in body:
                    record[field] = body[field]
            return record, None

        return self._answer(request, handler)


@pytest_twisted.async_yield_fixture
async def cloudflare():
    fake = FakeCloudflare()
    fake.start()
    yield fake
    await fake.stop()
